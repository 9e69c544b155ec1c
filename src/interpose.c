/* interpose: under construction */
