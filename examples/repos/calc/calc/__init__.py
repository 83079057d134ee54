"""A tiny calculator package used by the airlock demo."""
