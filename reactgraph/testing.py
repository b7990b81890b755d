"""`reactgraph.testing`: chat models for testing graphs, tools and middleware without a network (models/testing.py).

`ScriptedChatModel` (replies in order), `FunctionModel` (a function of the messages and the request) and
`SchemaTestModel` (calls the bound tools with arguments made from their schemas, then answers); each records
or honours the purpose the model gateway gives every request (`RequestInfo.purpose`).
"""

from reactgraph.models.testing import FunctionModel, RequestInfo, SchemaTestModel, ScriptedChatModel, example_value

__all__ = ["FunctionModel", "RequestInfo", "SchemaTestModel", "ScriptedChatModel", "example_value"]
