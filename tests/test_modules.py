"""The module contract: ordering, fail-fast loading, allow-list, registration through the Api."""

import pytest

from trellis import EventTopic, Module, create_app
from trellis.modules import ModuleError, parse_allow_list, resolve


def names(modules):
    return [m.name for m in modules]


def test_modules_are_ordered_by_requires():
    mods = [Module("chat", requires=("authentication",)), Module("authentication"), Module("email")]
    assert names(resolve(mods)) == ["authentication", "chat", "email"]


def test_nested_requirements_come_first():
    mods = [Module("a", requires=("b",)), Module("b", requires=("c",)), Module("c")]
    assert names(resolve(mods)) == ["c", "b", "a"]


def test_missing_dependency_fails_with_clear_message():
    with pytest.raises(ModuleError, match="'chat' requires 'authentication'"):
        resolve([Module("chat", requires=("authentication",))])


def test_a_used_module_comes_first_when_there_and_is_not_needed():
    mods = [Module("forms", uses=("email",)), Module("email")]
    assert names(resolve(mods)) == ["email", "forms"]
    assert names(resolve(mods, parse_allow_list("forms"))) == ["forms"]  # optional: no error without it
    assert names(resolve([Module("a", uses=("z",)), Module("z", requires=("b",)), Module("b")])) == ["b", "z", "a"]


def test_duplicate_module_name_fails():
    with pytest.raises(ModuleError, match="two installed modules are named 'email'"):
        resolve([Module("email"), Module("email")])


def test_cycle_fails():
    with pytest.raises(ModuleError, match="cycle"):
        resolve([Module("a", requires=("b",)), Module("b", requires=("a",))])


def test_allow_list_filters_and_checks_dependencies():
    mods = [Module("authentication"), Module("chat", requires=("authentication",)), Module("email")]
    assert names(resolve(mods, parse_allow_list("email"))) == ["email"]
    with pytest.raises(ModuleError, match="requires 'authentication'"):
        resolve(mods, parse_allow_list("chat"))
    with pytest.raises(ModuleError, match="not installed: sms"):
        resolve(mods, parse_allow_list("email,sms"))


def test_allow_list_parsing():
    assert parse_allow_list(None) is None
    assert parse_allow_list(" ") is None
    assert parse_allow_list("a, b,,c") == {"a", "b", "c"}


def test_create_app_fails_fast_on_missing_dependency(app_config):
    with pytest.raises(ModuleError, match="requires 'authentication'"):
        create_app(app_config, modules=[Module("chat", requires=("authentication",))])


def test_module_routes_are_served_and_documented(greeter_client):
    assert greeter_client.get("/greeter/hello").get_json() == {"message": "hello"}
    doc = greeter_client.get("/openapi.json").get_json()
    assert "/greeter/hello" in doc["paths"]
    assert any(tag["name"] == "greeter" for tag in doc["tags"])


def test_installed_modules_obey_trellis_modules_allow_list(app_config):
    with pytest.raises(ModuleError, match="not installed: nothing-like-this"):
        create_app({**app_config, "MODULES": "nothing-like-this"})


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: EventTopic("greeter.hello", "two segments"), "must be <module>.<thing>.<action>"),
        (lambda: EventTopic("*.hello.create", "any module"), "never the module"),
        (lambda: EventTopic("greeter.hel lo.create", "a space"), "must be <module>.<thing>.<action>"),
        (lambda: EventTopic("greeter.hello.create", " "), "needs a description"),
        (lambda: EventTopic("greeter.hello.create", "d", {"n": ""}), "payload must be"),
        (lambda: EventTopic("greeter.hello.create", "d", ["n"]), "payload must be"),
        (lambda: EventTopic("greeter.hello.create", "d", dict), "payload must be"),
        (lambda: Module("greeter", events=(EventTopic("chat.message.create", "not ours"),)), "begin with 'greeter'"),
        (lambda: Module("greeter", events=("greeter.hello.create",)), "not an EventTopic"),
        (
            lambda: Module("greeter", events=(EventTopic("greeter.a.b", "one"), EventTopic("greeter.a.b", "two"))),
            "twice",
        ),
    ],
)
def test_a_malformed_event_declaration_fails_fast(make, message):
    with pytest.raises(ModuleError, match=message):
        make()


def test_a_module_records_only_the_topics_it_declares(app_config, db):
    """Test apps refuse an undeclared topic of a loaded module: the suite's modules record what they declare."""
    from trellis import events

    declared = Module("greeter", events=(EventTopic("greeter.*.create", "A greeting was made"),))
    app = create_app(app_config, modules=[declared])
    with app.app_context():
        events.record("greeter.hello.create", {"n": 1})  # a pattern's '*' takes any thing
        with pytest.raises(ModuleError, match="records event 'greeter.hello.delete' without declaring it"):
            events.record("greeter.hello.delete", {"n": 2})
        assert [topic.pattern for topic in events.topics()] == ["greeter.*.create"]


def test_a_declared_payload_holds_only_the_keys_it_declares(app_config, db):
    """Test apps refuse a payload key its topic does not declare, whether the payload is a dict or its JSON
    text, or a topic's schema class names the keys."""
    from marshmallow import Schema, fields

    from trellis import events

    class Greeting(Schema):
        _id = fields.String()
        made_at = fields.String(data_key="createdAt")

    declared = Module(
        "greeter",
        events=(
            EventTopic("greeter.hello.create", "A greeting was made", {"n": "how many"}),
            EventTopic("greeter.hello.update", "A greeting changed", Greeting),
            EventTopic("greeter.hello.delete", "A greeting went"),  # declares nothing: nothing checked
        ),
    )
    app = create_app(app_config, modules=[declared])
    with app.app_context():
        events.record("greeter.hello.create", {"n": 1})
        events.record("greeter.hello.update", '{"_id": "a", "createdAt": "now"}')
        events.record("greeter.hello.delete", {"anything": True})
        with pytest.raises(ModuleError, match=r"records payload keys \['m'\] its topic does not declare"):
            events.record("greeter.hello.create", {"n": 1, "m": 2})
        with pytest.raises(ModuleError, match=r"payload keys \['made_at'\]"):
            events.record("greeter.hello.update", {"made_at": "now"})


def test_every_installed_module_declares_its_event_payloads(app):
    """The payload of every built-in topic is declared, so subscribers (webhooks, consumers) know its keys."""
    undeclared = [t.pattern for m in app.extensions["trellis"].modules for t in m.events if t.payload is None]
    assert undeclared == []
