/* stats: under construction */
