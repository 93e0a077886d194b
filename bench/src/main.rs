//! `tern-bench`: runs the suite, writes `bench/results.json` and `bench/details.json`, and
//! regenerates the marked section of `docs/BENCHMARKS.md`.
//!
//! ```text
//! tern-bench [--quick] [--only echo,frames,relay,paste,download,predict,resume,history,cost,core,load] [--out DIR] [--doc FILE | --no-doc]
//! ```

use std::path::PathBuf;

use anyhow::{Context, bail};
use tern_bench::{Options, Part, report};

fn main() -> anyhow::Result<()> {
    let mut options = Options::full();
    let mut out = PathBuf::from("bench");
    let mut doc = Some(PathBuf::from("docs/BENCHMARKS.md"));
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => options = Options { parts: options.parts, ..Options::quick() },
            "--only" => {
                let list = args.next().context("--only needs a list")?;
                options.parts = list
                    .split(',')
                    .map(|p| Part::parse(p).with_context(|| format!("unknown part {p:?}")))
                    .collect::<anyhow::Result<_>>()?;
            }
            "--out" => out = args.next().context("--out needs a directory")?.into(),
            "--doc" => doc = Some(args.next().context("--doc needs a file")?.into()),
            "--no-doc" => doc = None,
            "-h" | "--help" => {
                println!(
                    "tern-bench [--quick] [--only echo,frames,relay,paste,download,predict,resume,history,cost,core,load] [--out DIR] [--doc FILE | --no-doc]"
                );
                return Ok(());
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let report = tern_bench::run(&options);
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
