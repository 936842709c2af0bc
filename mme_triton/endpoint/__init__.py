"""endpoint stage."""
