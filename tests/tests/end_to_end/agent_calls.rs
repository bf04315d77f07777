//! Constrained decoding of tool calls on the real default model (Gemma 3 270M, a base model:
//! it rarely opens a call on its own, so each request forces the call opener and lets the
//! model write the rest). Over a set of varied requests, every call the grammar completed
//! must parse and validate against its tool's schema. A grammar cannot make a call end within
//! a token budget (a path may be 4,096 bytes; the base model sometimes repeats itself inside
//! one until the agent loop's 384 tokens run out): such a call is cut off, which the agent loop
//! refuses as `invalid_call`, and is counted apart; most calls must still complete. The mask's
//! cost per token is printed.
//! With `COMPANION_COMPARE_UNMASKED=1` the same requests are also decoded without the mask, to
//! show how many calls would have been broken (a measurement, not a check: it doubles the
//! test's time, so CI leaves it out):
//!
//! `COMPANION_COMPARE_UNMASKED=1 cargo test --release -p companion-tests --test end_to_end -- agent_calls:: --nocapture`

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use agent::calls::{self, CallFormat, Entry, Piece};
use agent::{Limits, declarations};
use chat::agent_loop::{AgentParams, CallGrammar, call_format, encode_pieces};
use engine::{GenerateOptions, GenerateParams, Prompt, SamplingParams, SessionId, StopReason};

const REQUESTS: &[&str] = &[
    "What files are in my documents folder?",
    "List the folders I gave you.",
    "Find the file named budget.",
    "Is there a file called tomatoes anywhere?",
    "Search my files for the word invoice.",
    "Which of my notes mention the dentist?",
    "Read the file docs/plan.md.",
    "Show me the start of notes/todo.txt.",
    "Read report.txt from offset 4096.",
    "Summarize the file papers/attention.pdf.",
    "What did we talk about last week regarding the trip to Lisbon?",
    "Search our old conversations for recipes.",
    "Save a note titled Groceries: milk, eggs, bread.",
    "Write down that the wifi password is on the fridge.",
    "Remember that Anna's birthday is on June 3rd.",
    "What notes do I have?",
    "List all my notes.",
    "Look through my notes for anything about taxes.",
    "Remind me to call mom tomorrow at 9:00.",
    "Set a reminder in 2 hours to take the bread out of the oven.",
    "Remind me on 2026-05-04 09:00 to renew the passport.",
    "What reminders do I have?",
    "Show my reminders, including the finished ones.",
    "What time is it?",
    "What day of the week is it today?",
    "What is 17 times 23?",
    "Calculate (12.5 + 7.5) / 4.",
    "How much is 2 to the power of 10?",
    "Which of my files talks about tomatoes? Summarize it.",
    "Find every file that mentions the garden.",
    "Open the recipe for tomato soup in my recipes folder.",
    "Search my files for meeting notes from Monday.",
];

#[test]
fn every_constrained_call_parses_and_validates() {
    let engine = companion_tests::spawn_engine(4096);
    let tokenizer = engine.tokenizer().clone();
    let format = call_format(&tokenizer);
    assert_eq!(
        format,
        CallFormat::FencedJson,
        "the default model is a Gemma 3"
    );
    let tools = declarations(&Limits::default());
    let grammar = CallGrammar::new(&tokenizer).expect("the grammar's token environment");
    let lark = calls::call_grammar(format, &tools);

    let compare_unmasked = std::env::var_os("COMPANION_COMPARE_UNMASKED").is_some();
    let mut valid_masked = 0;
    let mut cut_off = 0;
    let mut valid_free = 0;
    let mut masked_tokens = 0usize;
    let mut mask_seconds = 0.0f64;
    let mut chosen: Vec<String> = Vec::new();
    for (i, request) in REQUESTS.iter().enumerate() {
        // the prompt the agent loop would give, with the call opener forced
        let mut pieces = calls::render(format, &tools, &[Entry::User(request.to_string())], true);
        pieces.extend(calls::opener_pieces(format));
        let prompt = encode_pieces(&tokenizer, &pieces, true).unwrap();
        if i == 0 {
            eprintln!("prompt with every tool declared: {} tokens", prompt.len());
        }
        let params = GenerateParams {
            // the agent loop's own budget for a call's body
            max_tokens: AgentParams::default().call_max_tokens,
            sampling: SamplingParams {
                seed: 1000 + i as u64,
                ..SamplingParams::default()
            },
            ..GenerateParams::default()
        };

        let constraint = grammar.constraint(&lark).unwrap();
        let g = engine
            .generate_with(
                SessionId::MAIN,
                Prompt::Ids(prompt.clone()),
                params.clone(),
                GenerateOptions {
                    constraint: Some(Box::new(constraint)),
                    cancel: Some(Arc::new(AtomicBool::new(false))),
                },
            )
            .unwrap()
            .wait(|_| {})
            .unwrap();
        masked_tokens += g.stats.constrained_tokens;
        mask_seconds += g.stats.constraint_seconds;
        let body = tokenizer.decode(&g.ids).unwrap();
        match calls::parse_call(format, &tools, &body) {
            Ok(call) => {
                valid_masked += 1;
                chosen.push(format!("{}: {}", call.name, call.arguments));
            }
            Err(problem) => {
                eprintln!(
                    "request {i}: masked call invalid ({problem}); stop {:?}: {body:?}",
                    g.stop_reason
                );
                if g.stop_reason == StopReason::MaxTokens {
                    cut_off += 1;
                }
            }
        }

        if !compare_unmasked {
            continue;
        }
        // the same request, the same seed, no mask: the call ends at its closing fence
        let free = engine
            .generate_on(
                SessionId::MAIN,
                Prompt::Ids(prompt),
                GenerateParams {
                    stop_strings: vec!["\n```".into()],
                    ..params
                },
            )
            .unwrap()
            .wait(|_| {})
            .unwrap();
        let free_body = format!("{}\n```", free.text);
        match calls::parse_call(format, &tools, &free_body) {
            Ok(_) => valid_free += 1,
            Err(problem) => eprintln!("request {i}: unmasked call invalid: {problem}"),
        }
    }
    let n = REQUESTS.len();
    eprintln!("calls chosen under the mask:");
    for c in &chosen {
        eprintln!("  {c}");
    }
    eprintln!(
        "constrained decoding over {n} requests: {valid_masked}/{n} valid with the mask, \
         {cut_off} cut off by the token budget"
    );
    if compare_unmasked {
        eprintln!(
            "without the mask: {valid_free}/{n} valid ({} would have failed)",
            n - valid_free
        );
    }
    eprintln!(
        "mask cost: {masked_tokens} tokens, {:.3} ms per token (compute_mask + consume_token)",
        1e3 * mask_seconds / masked_tokens.max(1) as f64
    );
    assert!(n >= 30);
    assert_eq!(
        valid_masked + cut_off,
        n,
        "every call the grammar completed is valid"
    );
    assert!(
        valid_masked >= n * 9 / 10,
        "only {valid_masked}/{n} calls completed within the agent loop's budget"
    );
}

#[test]
fn the_grammar_admits_only_declared_tools() {
    let engine = companion_tests::spawn_engine(1024);
    let tokenizer = engine.tokenizer().clone();
    let tools = declarations(&Limits::default());
    let grammar = CallGrammar::new(&tokenizer).unwrap();
    let lark = calls::call_grammar(CallFormat::FencedJson, &tools);
    let check =
        |body: &str| grammar_takes(&grammar, &tokenizer, &lark, &[Piece::Text(body.into())]);
    assert!(check("\n{\"name\": \"now\", \"parameters\": {}}\n```"));
    assert!(check(
        "\n{\"name\": \"read_file\", \"parameters\": {\"path\": \"a.txt\", \"offset\": 5}}\n```"
    ));
    assert!(!check(
        "\n{\"name\": \"delete_everything\", \"parameters\": {}}\n```"
    ));
    assert!(
        !check("\n{\"name\": \"read_file\", \"parameters\": {}}\n```"),
        "path is required"
    );
    assert!(!check(
        "\n{\"name\": \"read_file\", \"parameters\": {\"path\": \"a\", \"offset\": -1}}\n```"
    ));
    assert!(!check(
        "\n{\"name\": \"now\", \"parameters\": {\"x\": 1}}\n```"
    ));
}

/// Whether the grammar `lark` takes `pieces` whole (text tokenized as data) and ends there.
fn grammar_takes(
    grammar: &CallGrammar,
    tokenizer: &engine::GemmaTokenizer,
    lark: &str,
    pieces: &[Piece],
) -> bool {
    use engine::TokenConstraint;
    let mut c = grammar.constraint(lark).unwrap();
    let ids = encode_pieces(tokenizer, pieces, false).unwrap();
    let last = ids.len().saturating_sub(1);
    for (i, id) in ids.into_iter().enumerate() {
        let allowed = c.allowed().unwrap();
        if allowed[id as usize / 32] & (1 << (id % 32)) == 0 {
            return false;
        }
        if c.accept(id).unwrap() {
            return i == last;
        }
    }
    false
}

/// Numbers in JSON always end: 16 digits at most before the point, as llama.cpp's JSON-schema
/// grammar bounds them, and 9 after it (see `agent::calls::json_rule`), in a response format,
/// in "any JSON object" and in a tool's arguments.
#[test]
fn json_numbers_are_bounded_so_every_reply_can_close() {
    let engine = companion_tests::spawn_engine(1024);
    let tokenizer = engine.tokenizer().clone();
    let grammar = CallGrammar::new(&tokenizer).unwrap();
    let schema = serde_json::json!({"type": "object", "properties": {
        "age": {"type": "integer"}, "height": {"type": "number"}
    }, "required": ["age", "height"]});
    let lark = format!("start: {}", calls::json_rule(&schema));
    let takes =
        |body: &str| grammar_takes(&grammar, &tokenizer, &lark, &[Piece::Text(body.into())]);
    let digits = |n: usize| "9".repeat(n);
    assert!(takes(&format!(
        "{{\"age\": {}, \"height\": 1.5}}",
        digits(16)
    )));
    assert!(!takes(&format!(
        "{{\"age\": {}, \"height\": 1.5}}",
        digits(17)
    )));
    assert!(takes("{\"age\": -3, \"height\": -0.123456789}"));
    assert!(!takes("{\"age\": 3, \"height\": 0.1234567891}"));
    assert!(!takes(&format!(
        "{{\"age\": 3, \"height\": {}.5}}",
        digits(17)
    )));

    let any = format!("start: {}", calls::json_rule(&calls::any_object_schema()));
    let takes_any =
        |body: &str| grammar_takes(&grammar, &tokenizer, &any, &[Piece::Text(body.into())]);
    assert!(takes_any(
        "{\"a\": [1, {\"b\": 2.5}], \"c\": \"x\", \"d\": null}"
    ));
    assert!(!takes_any(&format!("{{\"a\": [{}]}}", digits(17))));

    let tool = agent::Tool {
        name: "set_age".into(),
        description: "".into(),
        parameters: serde_json::json!({"type": "object", "properties": {"age": {"type": "integer"}}}),
        writes: false,
    };
    let call = calls::call_grammar(CallFormat::FencedJson, std::slice::from_ref(&tool));
    let takes_call =
        |body: &str| grammar_takes(&grammar, &tokenizer, &call, &[Piece::Text(body.into())]);
    let body = |n: usize| {
        format!(
            "\n{{\"name\": \"set_age\", \"parameters\": {{\"age\": {}}}}}\n```",
            digits(n)
        )
    };
    assert!(takes_call(&body(16)));
    assert!(!takes_call(&body(17)));
}

/// Gemma 4's call grammar (written out by us, not llguidance's JSON) on the Gemma 4 fixture
/// whose vocabulary has the tool tokens (gemma4-bpe):
/// item counts, constants and 16-digit numbers hold, and a complete call ends the grammar.
#[test]
fn gemma4_call_grammar_counts_items_and_bounds_numbers() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/gemma-family/gemma4-bpe.q8_0.gguf");
    let file = engine::gguf::ModelFile::open(&path).unwrap();
    let tokenizer = engine::GemmaTokenizer::from_gguf(&file).unwrap();
    let grammar = CallGrammar::new(&tokenizer).unwrap();
    let tool = agent::Tool {
        name: "pick".into(),
        description: "".into(),
        parameters: serde_json::json!({"type": "object", "properties": {
            "kind": {"const": "fruit"},
            "n": {"type": "integer"},
            "names": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
        }, "required": ["kind", "n", "names"]}),
        writes: false,
    };
    let lark = calls::call_grammar(CallFormat::Gemma4, std::slice::from_ref(&tool));
    // Gemma 4's quote token is `<|"|>`, a control token: the pieces carry it as one
    let takes = |n: &str, names: &[&str], kind: &str| {
        let mut pieces = vec![Piece::Text("call:pick{kind:".to_string())];
        pieces.extend([
            Piece::Control("<|\"|>"),
            Piece::Text(kind.into()),
            Piece::Control("<|\"|>"),
        ]);
        pieces.push(Piece::Text(format!(",n:{n},names:[")));
        for (i, name) in names.iter().enumerate() {
            if i > 0 {
                pieces.push(Piece::Text(",".into()));
            }
            pieces.extend([
                Piece::Control("<|\"|>"),
                Piece::Text((*name).into()),
                Piece::Control("<|\"|>"),
            ]);
        }
        pieces.push(Piece::Text("]}".into()));
        pieces.push(Piece::Control("<tool_call|>"));
        grammar_takes(&grammar, &tokenizer, &lark, &pieces)
    };
    assert!(takes("3", &["a"], "fruit"));
    assert!(takes("9999999999999999", &["a", "b"], "fruit"));
    assert!(!takes("99999999999999999", &["a"], "fruit"), "17 digits");
    assert!(!takes("3", &[], "fruit"), "minItems");
    assert!(!takes("3", &["a", "b", "c"], "fruit"), "maxItems");
    assert!(!takes("3", &["a"], "stone"), "const");
}
