/* log: under construction */
