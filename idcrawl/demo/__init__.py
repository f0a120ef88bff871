"""The bundled demo site and the demo job (README command 1)."""
