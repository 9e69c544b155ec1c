/* driver: under construction */
