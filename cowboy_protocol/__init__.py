"""cowboy_protocol package."""
