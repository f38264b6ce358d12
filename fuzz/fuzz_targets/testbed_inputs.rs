//! The text the testbed parses: `tc` statistics (class text, qdisc JSON)
//! of priority and FIFO ports, `--homa-set` overrides, Homa runtime
//! configuration TOML, and the Ethernet frames `testbed sird-sniff` reads
//! off a switch port. None may panic, whatever the bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Frames as a packet socket hands them over: any bytes at all.
    let _ = homa_testbed::sird_sniff::data_flags(data);
    let mut counts = std::collections::BTreeMap::new();
    homa_testbed::sird_sniff::count(&mut counts, data);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = homa_testbed::tc::parse_class_text(text);
    let _ = homa_testbed::tc::parse_qdisc_json(text);
    let _ = homa_testbed::tc::nic_stats_from(0, text);
    // Two inputs at once: class text and qdisc JSON split at the first NUL.
    let (a, b) = text.split_once('\0').unwrap_or((text, ""));
    // Ports have 8 priority queues, or 1 (a FIFO port); try a level count
    // from the input too.
    let levels = data.first().map_or(8, |b| b % 9);
    let _ = homa_testbed::tc::port_stats_from(1, levels, a, b);
    let _ = homa_testbed::tc::port_stats_from(1, 1, a, b);
    let sets: Vec<String> = text.split(',').map(str::to_string).collect();
    let _ = homa_testbed::bench::apply_overrides(&homa::Config::default(), &sets);
    let _ = homa::Config::from_toml_str(text);
});
