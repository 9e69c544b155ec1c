/* config: under construction */
