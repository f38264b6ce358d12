//! The text the testbed parses: `tc` statistics (class text, qdisc JSON),
//! `--homa-set` overrides, and Homa runtime configuration TOML. None may
//! panic, whatever the bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = homa_testbed::tc::parse_class_text(text);
    let _ = homa_testbed::tc::parse_qdisc_json(text);
    let _ = homa_testbed::tc::nic_stats_from(0, text);
    // Two inputs at once: class text and qdisc JSON split at the first NUL.
    let (a, b) = text.split_once('\0').unwrap_or((text, ""));
    let _ = homa_testbed::tc::port_stats_from(1, a, b);
    let sets: Vec<String> = text.split(',').map(str::to_string).collect();
    let _ = homa_testbed::bench::apply_overrides(&homa::Config::default(), &sets);
    let _ = homa::Config::from_toml_str(text);
});
