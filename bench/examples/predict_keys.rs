//! The predictive-echo trace key by key: which keys were shown late and which displays were
//! wrong, grouped by what came just before the key (issue 36's classification).
//!
//! ```text
//! cargo run -p tern-bench --example predict_keys -- [RTT_MS ...] [--before] [--dump DIR]
//! ```
//!
//! Runs the suite's trace (`tern_bench::predictive::trace`) once at RTT 0 for the reference
//! screens, then `tern-probe`'s engine at each RTT (adaptive; with `--before` also with the
//! predictor's rules before issue 36, right after), and prints each key not shown within 5 ms,
//! each wrong display, and a table of keys by class: shown within 5 ms / all.

use std::collections::BTreeMap;

use tern::predict::PredictConfig;
use tern_bench::predictive::{
    IMMEDIATE_MS, KeyClass, LinkSetting, analyze, dump, reference, run_tern, trace,
};
use tern_native::script::Action;

/// What came before a key, for the table.
fn context(keys: &[Vec<u8>], k: usize, part: &str) -> String {
    let class = KeyClass::of(&keys[k]);
    let before = k.checked_sub(1).map(|j| KeyClass::of(&keys[j]));
    let after = match before {
        None => "first key",
        Some(KeyClass::Enter) => "after Enter",
        Some(KeyClass::Other) => "after a control key",
        Some(KeyClass::Arrow) => "after an arrow",
        Some(KeyClass::Backspace) => "after Backspace",
        Some(KeyClass::Printable) => "after a printable",
    };
    format!("{part}: {} {after}", class.label())
}

fn main() -> anyhow::Result<()> {
    let mut rtts = Vec::new();
    let mut dump_dir = None;
    let mut before = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--dump" {
            dump_dir = args.next();
        } else if a == "--before" {
            before = true;
        } else {
            rtts.push(a.parse::<u64>()?);
        }
    }
    if rtts.is_empty() {
        rtts = vec![200, 500];
    }
    let seed = 0x7E4D;
    let (actions, parts) = trace(false, seed);
    let keys: Vec<Vec<u8>> = actions
        .iter()
        .filter_map(|a| if let Action::Type(b) = a { Some(b.clone()) } else { None })
        .collect();
    let part_of = |k: usize| parts.iter().find(|(_, r)| r.contains(&k)).map_or("?", |(n, _)| n);
    eprintln!("reference run ({} keys)", keys.len());
    let reference = reference(&actions)?;
    let runs = rtts.iter().enumerate().flat_map(|(i, rtt)| {
        let rules: &[bool] = if before { &[false, true] } else { &[false] };
        rules.iter().map(move |&b| (i, *rtt, b))
    });
    for (i, rtt, before_36) in runs {
        // The suite's link seeds: 60 ms is its first link, 200 its second, 500 its third.
        let link_seed = seed + [60, 200, 500].iter().position(|r| *r == rtt).unwrap_or(i) as u64;
        let setting = LinkSetting::rtt(rtt);
        let rules = if before_36 { "rules before issue 36" } else { "rules now" };
        eprintln!("tern-probe at RTT {rtt} ms, {rules}");
        let rec = run_tern(&setting, &actions, PredictConfig::default(), before_36, link_seed)?;
        let m = analyze(&rec, &reference)?;
        if let Some(dir) = &dump_dir {
            std::fs::create_dir_all(dir)?;
            let name = if before_36 { "before36" } else { "now" };
            std::fs::write(format!("{dir}/tern-{rtt}-{name}.log"), dump(&rec, &m))?;
        }
        println!(
            "\n== RTT {rtt} ms, {rules}: {:.2} % within 5 ms, {} keys causing a wrong display \
             ({:.2} %), {} display states with a password character",
            m.immediate_fraction() * 100.0,
            m.wrong_keys,
            m.wrong_per_key() * 100.0,
            m.secret_displayed
        );
        let mut table: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for (k, latency) in m.latency.iter().enumerate() {
            let ctx = context(&keys, k, part_of(k));
            let fast = latency.is_some_and(|l| l <= IMMEDIATE_MS);
            let e = table.entry(ctx.clone()).or_default();
            e.1 += 1;
            if fast {
                e.0 += 1;
            } else {
                let l = latency.map_or("not shown".to_owned(), |l| format!("{l:.1} ms"));
                println!("late {k:3} {:?} ({ctx}): {l}", String::from_utf8_lossy(&keys[k]));
            }
        }
        for &(t, r, c, glyph, stayed) in &m.wrong_list {
            let key = rec.keys.partition_point(|(kt, _)| *kt <= t).saturating_sub(1);
            println!(
                "wrong {glyph:?} at ({r},{c}) for {stayed:.0} ms, after key {key} {:?} ({})",
                String::from_utf8_lossy(&keys[key]),
                context(&keys, key, part_of(key))
            );
        }
        println!("class: within 5 ms / keys");
        for (ctx, (fast, n)) in &table {
            println!("  {ctx}: {fast} / {n}");
        }
        if let Some(c) = &rec.counters {
            println!("counters: {c:?}");
        }
    }
    Ok(())
}
