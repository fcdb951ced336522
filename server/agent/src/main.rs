//! `hearth-agent`: the small agent inside every pod. It listens on one
//! address, binds each job (code, dependencies, topology), runs it in a
//! sandbox, streams its output, enforces its timeout, and wipes the pod when
//! told to. Std only (and libc's bindings for four system calls std lacks),
//! threads only: it ships in every pod image.
//!
//! Modules: [`args`] (command line), [`serve`] (connections and the protocol),
//! [`bind`] (files, input, dependency environments), [`run`] (spawning,
//! streaming, timeouts), [`sandbox`] (bubblewrap, cgroups, killing trees),
//! [`resident`] (a pod's sandbox serving job after job), [`sys`] (the
//! system calls std lacks).

use std::process::ExitCode;

mod args;
mod bind;
mod resident;
mod run;
mod sandbox;
mod serve;
mod sys;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match argv.first().map(String::as_str) {
        Some(sandbox::ENTER_CGROUPS) => return sandbox::enter_cgroups_and_exec(&argv[1..]),
        Some(sandbox::IN_SANDBOX) => return sandbox::in_sandbox_exec(&argv[1..]),
        Some(sandbox::REMOVE_CGROUPS) => return sandbox::remove_cgroups_after(&argv[1..]),
        Some(resident::SERVE_JOBS) => return resident::serve_jobs(),
        _ => {}
    }
    let args = match args::parse(argv) {
        Ok(args::Parsed::Run(args)) => args,
        Ok(args::Parsed::Help) => {
            println!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("hearth-agent: {e}\n\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    match serve::serve(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hearth-agent: {e}");
            ExitCode::FAILURE
        }
    }
}
