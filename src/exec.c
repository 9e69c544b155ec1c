/* exec: under construction */
