"""The BFCL call scorer (evals/bfcl.py) on hand-made cases, one rule each, and the BFCL function docs as JSON
schema (evals/bfcl.py)."""

from __future__ import annotations

import pytest

from reactgraph.evals.bfcl import RECORDED, json_schema, recorded_calls, recorded_gateway, score_calls, standardise

AREA = {"name": "geometry.area", "description": "Area of a shape.", "parameters": {"type": "dict", "properties": {
    "base": {"type": "integer"}, "height": {"type": "float"}, "unit": {"type": "string"},
    "exact": {"type": "boolean"}}, "required": ["base", "height"]}}
AREA_ANSWER = [{"geometry.area": {"base": [10], "height": [5.0], "unit": ["units", "cm", ""], "exact": ["", True]}}]


def area(**args: object) -> str:
    return score_calls([AREA], AREA_ANSWER, [("geometry_area", dict(args))]).reason or "ok"


def test_a_call_is_scored_on_its_name_with_dots_offered_as_underscores():
    assert area(base=10, height=5.0) == "ok"
    assert score_calls([AREA], AREA_ANSWER, [("geometry.area", {"base": 10, "height": 5.0})]).reason \
        == "no call matches geometry_area: called geometry.area"
    assert "called area" in score_calls([AREA], AREA_ANSWER, [("area", {"base": 10, "height": 5.0})]).reason


def test_required_arguments_must_be_there_and_unknown_ones_must_not():
    assert area(base=10) == "no call matches geometry_area: missing required argument 'height'"
    assert area(base=10, height=5.0, colour="red") == "no call matches geometry_area: unexpected argument 'colour'"
    narrower = [{"geometry.area": {"base": [10], "height": [5.0]}}]  # in the doc, but no possible answer has it
    assert "unexpected argument 'unit'" in score_calls([AREA], narrower, [
        ("geometry_area", {"base": 10, "height": 5.0, "unit": "cm"})]).reason


@pytest.mark.parametrize(("args", "verdict"), [
    ({"base": 10, "height": 5}, "ok"),  # an int for a float, as Python (and BFCL) accept
    ({"base": 10.0, "height": 5.0}, "'base': expected integer, got float"),
    ({"base": True, "height": 5.0}, "'base': expected integer, got bool"),
    ({"base": "10", "height": 5.0}, "'base': expected integer, got str"),
    ({"base": 10, "height": 5.0, "exact": 1}, "'exact': expected boolean, got int"),
])
def test_values_must_have_the_docs_python_type(args, verdict):
    assert verdict in area(**args)


def test_a_value_of_the_possible_answers_own_type_stands_for_a_variable_and_is_compared_as_is():
    doc = {"name": "f", "parameters": {"type": "dict", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}
    answer = [{"f": {"x": ["num_items"]}}]
    assert score_calls([doc], answer, [("f", {"x": "num_items"})]).correct
    assert not score_calls([doc], answer, [("f", {"x": "Num Items"})]).correct  # no standardising for a variable


def test_strings_are_compared_standardised_and_only_among_the_allowed_values():
    assert area(base=10, height=5.0, unit="CM") == "ok"
    doc = {"name": "f", "parameters": {"type": "dict", "properties": {"d": {"type": "string"}}, "required": ["d"]}}
    answer = [{"f": {"d": ["Jan.1,2022", "New York, NY", "it's"]}}]
    for said in ("jan 1 2022", "JAN-1/2022", "new_york ny", 'it"s', "it's"):
        assert score_calls([doc], answer, [("f", {"d": said})]).correct, said
    assert "'d': 'Jan 2 2022' is not one of" in score_calls([doc], answer, [("f", {"d": "Jan 2 2022"})]).reason
    assert standardise("A b,c./-_*^'") == 'abc"'


def test_a_parameter_left_out_must_allow_the_empty_answer():
    assert area(base=10, height=5.0) == "ok"  # unit and exact allow ""
    strict = [{"geometry.area": {"base": [10], "height": [5.0], "unit": ["cm"]}}]
    assert "argument 'unit' left out, but it is not optional" in score_calls([AREA], strict, [
        ("geometry_area", {"base": 10, "height": 5.0})]).reason


def test_lists_are_compared_in_order_element_by_element_and_their_items_typed():
    doc = {"name": "f", "parameters": {"type": "dict", "properties": {
        "xs": {"type": "array", "items": {"type": "float"}},
        "names": {"type": "tuple", "items": {"type": "string"}}}, "required": ["xs"]}}
    answer = [{"f": {"xs": [[1.5, 2.5]], "names": [["Alice", "Bob"], ""]}}]
    assert score_calls([doc], answer, [("f", {"xs": [1.5, 2.5], "names": ["alice", "B o b"]})]).correct
    assert not score_calls([doc], answer, [("f", {"xs": [2.5, 1.5]})]).correct
    assert "items of array must be float" in score_calls([doc], answer, [("f", {"xs": ["1.5", "2.5"]})]).reason


def test_dicts_are_compared_key_by_key_and_lists_of_dicts_in_order():
    doc = {"name": "f", "parameters": {"type": "dict", "properties": {
        "where": {"type": "dict", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}},
        "rows": {"type": "array", "items": {"type": "dict"}}}, "required": ["where"]}}
    answer = [{"f": {"where": [{"city": ["Paris"], "zip": ["75001", ""]}],
                     "rows": [[{"k": ["a"]}, {"k": ["b"]}], ""]}}]
    assert score_calls([doc], answer, [("f", {"where": {"city": "paris"}})]).correct
    assert not score_calls([doc], answer, [("f", {"where": {"city": "Paris", "country": "FR"}})]).correct
    assert not score_calls([doc], answer, [("f", {"where": {"zip": "75001"}})]).correct  # city may not be left out
    in_order, swapped = [{"k": "a"}, {"k": "b"}], [{"k": "b"}, {"k": "a"}]
    assert score_calls([doc], answer, [("f", {"where": {"city": "Paris"}, "rows": in_order})]).correct
    assert not score_calls([doc], answer, [("f", {"where": {"city": "Paris"}, "rows": swapped})]).correct


def test_several_expected_calls_match_in_any_order_one_call_each():
    weather = {"name": "weather", "parameters": {"type": "dict", "properties": {"city": {"type": "string"}},
                                                  "required": ["city"]}}
    answer = [{"weather": {"city": ["Paris"]}}, {"weather": {"city": ["Rome"]}}]
    paris, rome = ("weather", {"city": "Paris"}), ("weather", {"city": "Rome"})
    assert score_calls([weather], answer, [rome, paris]).correct
    assert score_calls([weather], answer, [paris, paris]).reason == (
        "no call matches weather: 'city': 'Paris' is not one of ['Rome']")
    assert score_calls([weather], answer, [paris]).reason == "expected 2 call(s), got 1"
    assert score_calls([weather], answer, [paris, rome, rome]).reason == "expected 2 call(s), got 3"


def test_like_bfcl_each_expected_call_takes_the_first_call_that_matches_it():
    # The first entry allows either city; it takes Rome's call, which the second entry needed (BFCL's greedy match).
    pick = {"name": "pick", "parameters": {"type": "dict", "properties": {"city": {"type": "string"}}}}
    answer = [{"pick": {"city": ["Paris", "Rome"]}}, {"pick": {"city": ["Rome"]}}]
    assert score_calls([pick], answer, [("pick", {"city": "Paris"}), ("pick", {"city": "Rome"})]).correct
    assert not score_calls([pick], answer, [("pick", {"city": "Rome"}), ("pick", {"city": "Paris"})]).correct


def test_bfcl_types_become_json_schema_the_gateway_enforces():
    schema = json_schema({"type": "dict", "required": ["a"], "properties": {
        "a": {"type": "float", "description": "x", "optional": False},
        "b": {"type": "tuple", "items": {"type": "integer"}}, "c": {"type": "any"},
        "d": {"type": "dict", "properties": {"e": {"type": "string", "enum": ["x", "y"], "format": "date"}}}}})
    assert schema == {"type": "object", "required": ["a"], "properties": {
        "a": {"type": "number", "description": "x"}, "b": {"type": "array", "items": {"type": "integer"}},
        "c": {}, "d": {"type": "object", "properties": {"e": {"type": "string", "enum": ["x", "y"]}}}}}
    assert json_schema(schema) == schema  # already JSON schema: unchanged


async def test_a_recorded_tool_records_the_call_and_runs_nothing():
    gateway = recorded_gateway([AREA])
    ok = await gateway.execute({"name": "geometry_area", "args": {"base": 10, "height": 5}, "id": "1"})
    assert ok.ok and ok.content == RECORDED
    bad = await gateway.execute({"name": "geometry_area", "args": {"base": "ten", "height": 5}, "id": "2"})
    assert not bad.ok and bad.status == "invalid_args"
    steps = [{"node": "act", "action": "geometry_area", "action_input": {"base": 10, "height": 5}, "status": "ok"},
             {"node": "act", "action": "geometry_area", "action_input": {"base": "ten"}, "status": "invalid_args"},
             {"node": "act", "action": "geometry_area", "action_input": {"height": 5, "base": 10}, "status": "ok"},
             {"node": "reflect", "action": None, "status": "reflection"}]
    assert recorded_calls(steps) == ([("geometry_area", {"base": 10, "height": 5})], 1)
