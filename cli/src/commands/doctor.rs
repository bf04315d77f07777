//! `companion doctor`: what this device can run, before anything is loaded — RAM, available
//! memory, backend, thermal state, the memory estimate for the chosen model and context, the
//! context recommended for it, and which common Gemma sizes would fit. Reads only the model's
//! GGUF header; `--json` prints one object.

use std::io::Write;

use anyhow::Result;
use clap::Args as ClapArgs;
use engine::gguf::ModelFile;
use engine::memory_guard::catalog::GEMMA_SIZES;
use engine::memory_guard::{
    MIN_USEFUL_CONTEXT, MemoryEstimate, ModelShape, fit_context, megabytes, system_memory,
};
use engine::thermal;
use serde_json::json;

use crate::options::ModelOptions;

#[derive(ClapArgs)]
pub struct Args {
    /// Print one JSON object instead of a report
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    model: ModelOptions,
}

pub fn run(args: Args) -> Result<()> {
    let config = args.model.engine_config();
    let memory = system_memory(None);
    let available = memory.available_bytes;
    let (_, backend, backend_notice) = engine::device::select_device(config.device);
    let mut source = thermal::source_for(&config.thermal);
    let thermal_state = source.read();
    let threads = args
        .model
        .threads
        .map(|t| t as usize)
        .unwrap_or_else(engine::device::physical_cores);
    let context = config.context;
    let chunk = config.prefill_chunk;

    // the model's Gemma 4 assistant (--assistant) and vision projector (--mmproj), or the
    // library's pairings: each checked against the model, and their bytes taken from what the
    // context may use, as loading does
    let assistant = paired_report(config.assistant_path.as_deref(), |path| {
        engine::inspect_assistant(path, &config.model_path)
    });
    let projector = paired_report(config.projector_path.as_deref(), |path| {
        engine::inspect_projector(path, &config.model_path)
    });
    let assistant_bytes = [&assistant, &projector]
        .iter()
        .filter_map(|a| {
            let a = a.as_ref()?;
            Some(a["fileBytes"].as_u64()? + a["workingBytes"].as_u64().unwrap_or(0))
        })
        .sum::<u64>();
    let available_for_model = available.map(|a| a.saturating_sub(assistant_bytes));
    // a file Companion cannot open or run is a problem the report names, not an error
    let opened = ModelFile::open(&config.model_path).and_then(|file| {
        let arch = engine::ModelArch::of(&file)?;
        let shape = ModelShape::of_file(&file)?;
        Ok((file, arch, shape))
    });
    let model = match opened {
        Ok((file, arch, shape)) => {
            let estimate = MemoryEstimate::new(&shape, context, chunk);
            let fit = fit_context(&shape, context, chunk, available_for_model);
            json!({
                "path": config.model_path,
                "name": arch.name,
                "architecture": arch.family.as_str(),
                "family": arch.family.display_name(),
                "tuning": arch.tuning,
                "tuningNotice": arch.tuning.notice(),
                "description": arch.summary(),
                "parameters": arch.parameter_count(),
                "quantization": file.quantization_label(),
                "fileBytes": file.file_size(),
                "estimate": estimate,
                "recommendedContext": fit.as_ref().ok().map(|f| f.context),
                "problem": fit.err().map(|e| e.to_string()),
            })
        }
        Err(e) => json!({ "path": config.model_path, "problem": e.to_string() }),
    };
    let sizes: Vec<_> = GEMMA_SIZES
        .iter()
        .map(|size| {
            let shape = size.shape();
            let wanted = context.min(size.max_context);
            let estimate = MemoryEstimate::new(&shape, wanted, chunk);
            let best = fit_context(&shape, wanted, chunk, available)
                .ok()
                .map(|f| f.context);
            json!({
                "name": size.name,
                "parameters": size.parameters,
                "fileBytes": size.file_bytes,
                "estimate": estimate,
                "fits": best == Some(wanted),
                "largestContext": best,
            })
        })
        .collect();
    let out = json!({
        "totalMemoryBytes": memory.total_bytes,
        "availableMemoryBytes": available,
        "availableSimulated": memory.simulated,
        "backend": backend,
        "backendNotice": backend_notice,
        "threads": threads,
        "thermal": { "state": thermal_state, "source": source.describe() },
        "context": context,
        "minimumUsefulContext": MIN_USEFUL_CONTEXT,
        "model": model,
        "assistant": assistant,
        "projector": projector,
        "gemmaSizes": sizes,
        "logFile": crate::log::log_file(),
    });

    let mut o = std::io::stdout().lock();
    if args.json {
        writeln!(o, "{out}")?;
        return Ok(());
    }
    let mb = |v: &serde_json::Value| v.as_u64().map_or("unknown".to_string(), megabytes);
    writeln!(
        o,
        "memory            {} total, {} available{}",
        mb(&out["totalMemoryBytes"]),
        mb(&out["availableMemoryBytes"]),
        if memory.simulated { " (simulated)" } else { "" }
    )?;
    writeln!(o, "backend           {backend}, {threads} threads")?;
    if let Some(n) = &backend_notice {
        writeln!(o, "                  {n}")?;
    }
    writeln!(
        o,
        "thermal           {thermal_state} ({})",
        source.describe()
    )?;
    let m = &out["model"];
    writeln!(o, "model             {}", config.model_path.display())?;
    if let (Some(family), Some(description)) = (m["family"].as_str(), m["description"].as_str()) {
        let parameters = m["parameters"].as_u64().unwrap_or(0) as f64;
        let size = if parameters >= 1e9 {
            format!("{:.1}B", parameters / 1e9)
        } else {
            format!("{:.0}M", parameters / 1e6)
        };
        writeln!(
            o,
            "architecture      {family}, {size} parameters, {} ({description})",
            m["quantization"].as_str().unwrap_or("?")
        )?;
    }
    print_paired(
        &mut o,
        "assistant        ",
        "Gemma 4 MTP assistant, ",
        &out["assistant"],
    )?;
    print_paired(&mut o, "vision projector ", "", &out["projector"])?;
    if let Some(tuning) = m["tuning"].as_str() {
        writeln!(o, "tuning            {tuning}")?;
        if let Some(notice) = m["tuningNotice"].as_str() {
            writeln!(o, "                  {notice}")?;
        }
    }
    if let Some(e) = m.get("estimate") {
        writeln!(
            o,
            "estimate          {} at {context} tokens (weights {}, KV cache {}, RoPE {}, compute {}, runtime {})",
            mb(&e["totalBytes"]),
            mb(&e["weightsBytes"]),
            mb(&e["kvCacheBytes"]),
            mb(&e["ropeBytes"]),
            mb(&e["computeBytes"]),
            mb(&e["runtimeBytes"])
        )?;
    }
    match (m["recommendedContext"].as_u64(), m["problem"].as_str()) {
        (Some(c), _) => writeln!(o, "recommended       context {c} tokens")?,
        (None, Some(p)) => writeln!(o, "recommended       {p}")?,
        _ => {}
    }
    match crate::log::log_file() {
        Some(path) => writeln!(o, "log               {}", path.display())?,
        None => writeln!(o, "log               none (see the notice above)")?,
    }
    writeln!(o, "Gemma sizes at {context} tokens of context:")?;
    for s in &sizes {
        let verdict = match (s["fits"].as_bool(), s["largestContext"].as_u64()) {
            (Some(true), _) => "fits".to_string(),
            (_, Some(c)) => format!("fits with a context of {c}"),
            _ => "does not fit".to_string(),
        };
        writeln!(
            o,
            "  {:<24} needs {:>8}  {verdict}",
            s["name"].as_str().unwrap_or("?"),
            mb(&s["estimate"]["totalBytes"])
        )?;
    }
    Ok(())
}

/// A file paired with the model, as the report shows it: what `inspect` says of it, or the
/// problem it names.
fn paired_report(
    path: Option<&std::path::Path>,
    inspect: impl FnOnce(&std::path::Path) -> engine::Result<engine::ModelFacts>,
) -> Option<serde_json::Value> {
    let path = path?;
    Some(match inspect(path) {
        Ok(facts) => json!({
            "path": path,
            "parameters": facts.parameters,
            "quantization": facts.quantization,
            "fileBytes": facts.file_bytes,
            "workingBytes": facts.working_bytes,
        }),
        Err(e) => json!({ "path": path, "problem": e.to_string() }),
    })
}

/// Its line: `label path (kind size)`, or `label problem`.
fn print_paired(
    o: &mut impl Write,
    label: &str,
    kind: &str,
    paired: &serde_json::Value,
) -> std::io::Result<()> {
    let Some(a) = paired.as_object() else {
        return Ok(());
    };
    match a.get("problem").and_then(|p| p.as_str()) {
        Some(problem) => writeln!(o, "{label} {problem}"),
        None => writeln!(
            o,
            "{label} {} ({kind}{}{})",
            a["path"].as_str().unwrap_or("?"),
            a["fileBytes"]
                .as_u64()
                .map_or("unknown".to_string(), megabytes),
            match a["workingBytes"].as_u64() {
                Some(w) if w > 0 => format!(", {} more while it works", megabytes(w)),
                _ => String::new(),
            }
        ),
    }
}
