"""Import paths the first releases documented; ``webapp.auth`` exports the same names."""
