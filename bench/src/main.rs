//! `tern-bench`: runs the suite, writes `bench/results.json` and `bench/details.json`, and
//! regenerates the marked section of `docs/BENCHMARKS.md`.
//!
//! `--merge` folds the rows of a partial run into the `results.json` and `details.json` already in
//! the output directory instead of replacing them.
//!
//! ```text
//! tern-bench [--quick] [--only echo,frames,relay,paste,download,predict,resume,history,cost,core,load,bytes,sessions,install,safari,show,viewers,chaos] [--merge] [--out DIR] [--doc FILE | --no-doc]
//! ```

use std::path::PathBuf;

use anyhow::{Context, bail};
use tern_bench::{Options, Part, report};

/// The chaos run's length in the full suite and in `--quick`, and its seed.
const CHAOS_SECONDS: u64 = 300;
const CHAOS_QUICK_SECONDS: u64 = 45;
const CHAOS_SEED: u64 = 16;

fn main() -> anyhow::Result<()> {
    let mut options = Options::full();
    let mut out = PathBuf::from("bench");
    let mut doc = Some(PathBuf::from("docs/BENCHMARKS.md"));
    // The chaos run (minutes of it) is a part of its own, last: tern_bench::chaos.
    let mut chaos = true;
    let mut merge = false;
    // The parts `--only` named: a merge replaces their earlier problems with their new ones.
    let mut only: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => options = Options { parts: options.parts, ..Options::quick() },
            "--only" => {
                let list = args.next().context("--only needs a list")?;
                only = list.split(',').map(str::to_owned).collect();
                chaos = list.split(',').any(|p| p == "chaos");
                options.parts = list
                    .split(',')
                    .filter(|&p| p != "chaos")
                    .map(|p| Part::parse(p).with_context(|| format!("unknown part {p:?}")))
                    .collect::<anyhow::Result<_>>()?;
            }
            "--merge" => merge = true,
            "--out" => out = args.next().context("--out needs a directory")?.into(),
            "--doc" => doc = Some(args.next().context("--doc needs a file")?.into()),
            "--no-doc" => doc = None,
            "-h" | "--help" => {
                println!(
                    "tern-bench [--quick] [--only echo,frames,relay,paste,download,predict,resume,history,cost,core,load,bytes,sessions,install,safari,show,viewers,chaos] [--merge] [--out DIR] [--doc FILE | --no-doc]"
                );
                return Ok(());
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let mut report = tern_bench::run(&options);
    if chaos {
        let seconds = if options.quick { CHAOS_QUICK_SECONDS } else { CHAOS_SECONDS };
        eprintln!("[bench] chaos: {seconds} s, seed {CHAOS_SEED}");
        tern_bench::chaos::rows(seconds, CHAOS_SEED, &mut report);
    }
    if merge {
        let parts: Vec<&str> = only.iter().map(String::as_str).collect();
        report = report::merge_into(&report, &out, &parts)
            .with_context(|| format!("merging into {}/results.json", out.display()))?;
    }
    report::write(&report, &out, doc.as_deref())?;
    print!("{}", report.markdown());
    eprintln!(
        "[bench] wrote {}/results.json, {}/details.json{}",
        out.display(),
        out.display(),
        doc.map(|d| format!(" and {}", d.display())).unwrap_or_default()
    );
    Ok(())
}
