"""cowboy_node package."""
