//! A panic on the engine thread (a bug in a kernel, say) is caught at the thread's boundary:
//! the request that met it gets a clear error, the engine reloads the model, and the next
//! request is served as if nothing had happened.

use companion_tests::spawn_engine;
use engine::{GenerateParams, Prompt, SamplingParams};

fn greedy(max_tokens: usize) -> GenerateParams {
    GenerateParams {
        max_tokens,
        sampling: SamplingParams::greedy(),
        ..GenerateParams::default()
    }
}

#[test]
fn a_panic_is_reported_and_the_engine_reloads_and_goes_on() {
    let handle = spawn_engine(512);
    let prompt = || Prompt::Text("The lighthouse keeper".into());
    let before = handle
        .generate(prompt(), greedy(12))
        .unwrap()
        .wait(|_| {})
        .unwrap();
    let scratch = handle.open_session().unwrap();
    assert_eq!(handle.restarts(), 0);

    let err = handle.panic_for_tests().unwrap().wait(|_| {}).unwrap_err();
    assert_eq!(err.code(), "engine_panic", "{err}");
    assert!(err.to_string().contains("restarted"), "{err}");

    // served by the reloaded model, exactly as before
    let after = handle
        .generate(prompt(), greedy(12))
        .unwrap()
        .wait(|_| {})
        .unwrap();
    assert_eq!(after.ids, before.ids);
    assert_eq!(
        after.stats.reused_tokens, 0,
        "the conversation's cache started over"
    );
    assert_eq!(handle.restarts(), 1);
    // sessions opened before the panic are gone; new ones work
    let gone = handle
        .generate_on(scratch.id(), prompt(), greedy(2))
        .unwrap()
        .wait(|_| {})
        .unwrap_err();
    assert!(gone.to_string().contains("is not open"), "{gone}");
    let fresh = handle.open_session().unwrap();
    let g = handle
        .generate_on(fresh.id(), prompt(), greedy(12))
        .unwrap()
        .wait(|_| {})
        .unwrap();
    assert_eq!(g.ids, before.ids);
}
