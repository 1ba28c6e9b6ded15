//! `standings`: parses the command line, runs the command, prints its answer (a table, or JSON
//! with `--json`) or its failure as code and message, and exits 0 only when it completed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;
use standings_cli::{Cli, output, run};

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let stop = Arc::new(AtomicBool::new(false));
    // A job stops between invocations; any other command is one call, which Ctrl-C ends as usual.
    if standings_cli::runs_a_job(&cli.command) {
        let flag = stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!(
                    "\nstopping after this invocation (Ctrl-C again to quit now: the invocation under way runs to its end, \
                     and the same command resumes once its lock is released)"
                );
                flag.store(true, Ordering::SeqCst);
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(130);
                }
            }
        });
    }
    match run(&cli, stop).await {
        Ok(answer) if cli.json => println!("{answer}"),
        Ok(answer) => print!("{}", output::readable(&answer)),
        Err(failure) => {
            if cli.json {
                println!("{}", failure.json());
            } else {
                // A job stopped part-way: what its invocations did, then why it stopped.
                if let Some(summary) = failure.summary() {
                    print!("{}", output::readable(summary));
                }
                eprintln!("standings: {failure}");
            }
            std::process::exit(failure.exit_code());
        }
    }
}
