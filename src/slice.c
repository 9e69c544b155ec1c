/* slice: under construction */
