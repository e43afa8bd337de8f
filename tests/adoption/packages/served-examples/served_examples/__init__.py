"""pydantic-ai's own examples (the `pydantic-ai-examples` package, unchanged), each served through a
wrapper module here: its deps factory, `ToolOptions` gating one of its tools, and the offline
`scripted` model in place of the provider the example names."""
