"""Division helpers used by the airlock demo's weakened-test scenario."""
