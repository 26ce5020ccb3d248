"""cowboy_runner package."""
