"""Text helpers used by the airlock demo's hostile-repository scenario."""
