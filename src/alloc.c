/* alloc: under construction */
