"""A support desk served by Sursis: `sursis serve --agents support_desk.agents:AGENTS`."""
