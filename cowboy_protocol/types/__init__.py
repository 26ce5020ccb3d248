"""types package."""
