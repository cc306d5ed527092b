"""One public layer per module; see ``keras_relational`` for the exported names."""
