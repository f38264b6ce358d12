"""Configurations: TOML text, dicts, files, presets, and their errors (the
cases of crates/homa/tests/errors.rs). Every check is the runtime's."""

import pytest

import homars


def test_presets_are_dicts_the_endpoint_takes():
    default = homars.default_config()
    loop = homars.loopback_config()
    assert default["core"]["max_message_size"] == 1_000_000
    assert loop["core"]["mtu"] == 65_000 and loop["core"]["max_message_size"] == 16 << 20
    assert default["transport"] == "udp" and default["fault_injection"] is None
    for cfg in (default, loop):
        with homars.Endpoint("127.0.0.1:0", cfg) as ep:
            assert ep.config["core"]["mtu"] == cfg["core"]["mtu"]
            assert ep.config["core"]["max_message_size"] == cfg["core"]["max_message_size"]


def test_toml_text_and_dict_and_file(tmp_path):
    toml = 'busy_poll = false\npoll_us = 10\n[core]\nmax_message_size = 2000000\n'
    path = tmp_path / "homa.toml"
    path.write_text(toml)
    for cfg in (
        toml,
        {"poll_us": 10, "busy_poll": False, "core": {"max_message_size": 2_000_000}},
        path,  # a pathlib.Path (os.PathLike)
    ):
        with homars.Endpoint("127.0.0.1:0", cfg) as ep:
            assert ep.config["poll_us"] == 10
            assert ep.config["core"]["max_message_size"] == 2_000_000
    # None and missing keys keep the defaults.
    with homars.Endpoint("127.0.0.1:0", {"fault_injection": None, "core": {}}) as ep:
        assert ep.config["poll_us"] == homars.default_config()["poll_us"]


def test_fault_injection_from_a_dict():
    cfg = {"fault_injection": {"drop_rate": 0.0, "seed": 7, "duplicate_rate": 1.0}}
    with homars.Endpoint("127.0.0.1:0", cfg) as ep:
        assert ep.config["fault_injection"]["duplicate_rate"] == 1.0


def test_config_errors_are_readable(tmp_path):
    with pytest.raises(homars.ConfigError) as info:
        homars.Endpoint("127.0.0.1:0", 'busy_poll = "yes"')
    text = str(info.value)
    assert "busy_poll" in text and "boolean" in text and "line 1" in text
    assert text.startswith("invalid configuration: ")
    assert isinstance(info.value, ValueError) and isinstance(info.value, homars.InvalidArgument)

    with pytest.raises(homars.ConfigError, match="line 2"):
        homars.Endpoint("127.0.0.1:0", '[core]\nmtu = "big"')
    with pytest.raises(homars.ConfigError, match="tcp"):
        homars.Endpoint("127.0.0.1:0", 'transport = "tcp"')
    with pytest.raises(homars.ConfigError):
        homars.Endpoint("127.0.0.1:0", "busy_poll = ")
    with pytest.raises(homars.ConfigError, match="num_priorities"):
        homars.Endpoint("127.0.0.1:0", {"core": {"num_priorities": 9}})
    with pytest.raises(homars.ConfigError, match="mtu 100"):
        homars.Endpoint("127.0.0.1:0", {"core": {"mtu": 100}})
    with pytest.raises(homars.ConfigError, match="drop_rate"):
        homars.Endpoint("127.0.0.1:0", {"fault_injection": {"drop_rate": 2.0}})
    missing = tmp_path / "nonexistent.toml"
    with pytest.raises(homars.ConfigError, match="nonexistent.toml"):
        homars.Endpoint("127.0.0.1:0", missing)


@pytest.mark.parametrize(
    "cfg, key",
    [
        ("busy_pol = true", "busy_pol"),
        ("[core]\nunsched_byte = 60000", "unsched_byte"),
        ({"busy_pol": True}, "busy_pol"),
        ({"core": {"unsched_byte": 60000}}, "unsched_byte"),
        ({"fault_injection": {"drop_rate": 0.1, "rate": 2}}, "rate"),
    ],
)
def test_unknown_keys_are_rejected(cfg, key):
    with pytest.raises(homars.ConfigError, match=key):
        homars.Endpoint("127.0.0.1:0", cfg)


def test_dict_values_must_be_toml_values():
    with pytest.raises(homars.ConfigError, match="core.mtu"):
        homars.Endpoint("127.0.0.1:0", {"core": {"mtu": object()}})
    with pytest.raises(homars.ConfigError, match="64 bits"):
        homars.Endpoint("127.0.0.1:0", {"poll_us": 1 << 70})
    with pytest.raises(homars.ConfigError, match="keys must be strings"):
        homars.Endpoint("127.0.0.1:0", {1: 2})
    with pytest.raises(TypeError, match="config"):
        homars.Endpoint("127.0.0.1:0", 42)
