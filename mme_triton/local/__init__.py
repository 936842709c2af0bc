"""local stage."""
