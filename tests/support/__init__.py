"""What the tests share that is not a test: scripted models and provider servers, tools that the real CLI and
service load by name (`--tools support.hostile_tools:TOOLS`, with tests/ on PYTHONPATH), local servers, waits.

pytest puts tests/ on sys.path (tests/ is no package), so test modules import these as `support.<module>`."""
