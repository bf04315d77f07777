//! A KV snapshot of any bytes restored into a session of a small model (the gemma3 family
//! fixture): refused or restored, never a panic, and the session usable afterwards. Half the
//! inputs are resealed with a correct checksum so the fuzzer reaches the layer parser.

use std::sync::{Mutex, OnceLock};

use engine::{Engine, EngineConfig, Session};
use sha2::{Digest, Sha256};

fn rig() -> &'static Mutex<(Engine, Session)> {
    static R: OnceLock<Mutex<(Engine, Session)>> = OnceLock::new();
    R.get_or_init(|| {
        let engine = Engine::load(EngineConfig {
            model_path: concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../tests/fixtures/gemma-family/gemma3-gqa.q8_0.gguf"
            )
            .into(),
            context: 256,
            prefill_chunk: 64,
            warm_up: false,
            ..EngineConfig::default()
        })
        .expect("fixture model");
        let session = engine.new_session().expect("session");
        Mutex::new((engine, session))
    })
}

pub fn check(data: &[u8]) {
    let mut guard = rig().lock().unwrap_or_else(|p| p.into_inner());
    let (engine, session) = &mut *guard;
    let mut bytes = data.to_vec();
    if bytes.first().is_some_and(|b| b & 1 == 1) && bytes.len() > 32 {
        let body = bytes.len() - 32;
        let sum = Sha256::digest(&bytes[..body]);
        bytes[body..].copy_from_slice(&sum);
    }
    if engine.restore(session, &bytes).is_err() {
        assert!(
            session.is_empty(),
            "a refused snapshot left the session half-written"
        );
    }
    // usable afterwards
    session.clear();
    let bos = engine.tokenizer().bos_id();
    session
        .prefill(engine.model(), &[bos])
        .expect("prefill after a restore");
}
