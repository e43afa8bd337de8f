"""The worlds context's storage, the World Agent's definition, sandbox and runner."""
