/* layout: under construction */
