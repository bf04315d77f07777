//! The user's settings: sampling, context, threads, device, system prompt, thermal policy and
//! theme. Kept in a file written atomically (`settings_file.rs`); this file is the pure part:
//! defaults, validation, and which changes need the engine reloaded.

use std::path::PathBuf;

use engine::{
    DeviceChoice, EngineConfig, GenerateParams, SamplingParams, Speculation, ThermalConfig,
};
use serde::{Deserialize, Serialize};

use crate::error::AppError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Theme {
    System,
    Light,
    Dark,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Settings {
    pub temperature: f32,
    pub top_p: f32,
    pub top_k: usize,
    pub repetition_penalty: f32,
    pub max_tokens: usize,
    /// Speculative decoding (`engine::speculate`): the same replies, faster where they repeat
    /// what the conversation holds.
    pub speculation: Speculation,
    pub context_size: usize,
    pub threads: usize,
    pub device: DeviceChoice,
    pub system_prompt: String,
    pub fair_rate: f64,
    pub serious_rate: f64,
    pub theme: Theme,
    /// Serve the local API (OpenAI-compatible) on 127.0.0.1:`api_port`; off unless the user
    /// switches it on.
    pub api_enabled: bool,
    pub api_port: u16,
    /// The model file in use; `None`: the default model (or `$COMPANION_MODEL`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_path: Option<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        let sampling = SamplingParams::default();
        let thermal = ThermalConfig::default();
        Settings {
            temperature: sampling.temperature,
            top_p: sampling.top_p,
            top_k: sampling.top_k,
            // a little, against the small models' habit of repeating themselves
            repetition_penalty: 1.1,
            max_tokens: 512,
            speculation: Speculation::default(),
            context_size: 4096,
            threads: engine::device::physical_cores(),
            device: DeviceChoice::platform_default(),
            system_prompt: String::new(),
            fair_rate: thermal.fair_rate,
            serious_rate: thermal.serious_rate,
            theme: Theme::System,
            api_enabled: false,
            api_port: api::DEFAULT_PORT,
            model_path: None,
        }
    }
}

impl Settings {
    /// Refuse values the engine cannot use, with a sentence naming the field.
    pub fn validate(&self) -> Result<(), AppError> {
        let bad = |field: &str, range: &str| {
            Err(AppError::new(
                "invalid_settings",
                format!("{field} must be {range}; change it and save again."),
            ))
        };
        if !(0.0..=2.0).contains(&self.temperature) {
            return bad("Temperature", "between 0 and 2");
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("Top-p", "above 0 and at most 1");
        }
        if self.top_k > 1000 {
            return bad("Top-k", "at most 1000 (0 turns it off)");
        }
        if !(1.0..=2.0).contains(&self.repetition_penalty) {
            return bad("Repetition penalty", "between 1 and 2");
        }
        if !(1..=8192).contains(&self.max_tokens) {
            return bad("Max tokens", "between 1 and 8192");
        }
        if !(256..=131_072).contains(&self.context_size) {
            return bad("Context size", "between 256 and 131072 tokens");
        }
        if !(1..=256).contains(&self.threads) {
            return bad("Threads", "between 1 and 256");
        }
        if !(0.1..=1.0).contains(&self.fair_rate) || !(0.1..=1.0).contains(&self.serious_rate) {
            return bad("The thermal rates", "between 0.1 and 1");
        }
        if self.serious_rate > self.fair_rate {
            return bad("The hot rate", "at most the warm rate");
        }
        if self.api_port < 1024 {
            return bad("The local API's port", "between 1024 and 65535");
        }
        Ok(())
    }

    /// Changing these needs the model loaded again; the rest apply to the next reply.
    pub fn needs_reload(&self, before: &Settings) -> bool {
        self.context_size != before.context_size
            || self.device != before.device
            || self.threads != before.threads
            || self.fair_rate != before.fair_rate
            || self.serious_rate != before.serious_rate
            || self.model_path != before.model_path
    }

    pub fn generate_params(&self) -> GenerateParams {
        GenerateParams {
            max_tokens: self.max_tokens,
            sampling: SamplingParams {
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                repetition_penalty: self.repetition_penalty,
                seed: engine_seed(),
                ..SamplingParams::default()
            },
            speculation: self.speculation,
            ..GenerateParams::default()
        }
    }

    pub fn model_path(&self) -> PathBuf {
        self.model_path
            .clone()
            .unwrap_or_else(engine::default_model_path)
    }

    pub fn engine_config(&self) -> EngineConfig {
        EngineConfig {
            model_path: self.model_path(),
            device: self.device,
            context: self.context_size,
            thermal: ThermalConfig {
                fair_rate: self.fair_rate,
                serious_rate: self.serious_rate,
                ..ThermalConfig::default()
            },
            ..EngineConfig::default()
        }
    }

    pub fn system_prompt(&self) -> Option<String> {
        let s = self.system_prompt.trim();
        (!s.is_empty()).then(|| s.to_string())
    }
}

/// Each reply samples with a new seed (a chat is not a benchmark); `COMPANION_SEED` pins it
/// for tests, which then get the same reply for the same prompt.
fn engine_seed() -> u64 {
    if let Some(seed) = std::env::var("COMPANION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return seed;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(42)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_round_trip_through_json() {
        let s = Settings::default();
        s.validate().unwrap();
        let json = serde_json::to_value(&s).unwrap();
        assert!(json.get("topP").is_some(), "{json}");
        assert_eq!(serde_json::from_value::<Settings>(json).unwrap(), s);
    }

    #[test]
    fn missing_fields_take_their_defaults() {
        let s: Settings = serde_json::from_str(r#"{"temperature": 0.2}"#).unwrap();
        assert_eq!(s.temperature, 0.2);
        assert_eq!(s.context_size, Settings::default().context_size);
    }

    #[test]
    fn bad_values_are_refused_with_the_field_named() {
        let s = Settings {
            top_p: 0.0,
            ..Settings::default()
        };
        let e = s.validate().unwrap_err();
        assert_eq!(e.code, "invalid_settings");
        assert!(e.message.starts_with("Top-p"), "{}", e.message);
        let s = Settings {
            fair_rate: 0.3,
            serious_rate: 0.5,
            ..Settings::default()
        };
        assert!(s.validate().is_err());
    }

    #[test]
    fn only_engine_settings_need_a_reload() {
        let a = Settings::default();
        let b = Settings {
            temperature: 0.1,
            system_prompt: "Be brief.".into(),
            max_tokens: 64,
            ..a.clone()
        };
        assert!(!b.needs_reload(&a));
        let c = Settings {
            context_size: 2048,
            ..a.clone()
        };
        assert!(c.needs_reload(&a));
        let d = Settings {
            model_path: Some("/x.gguf".into()),
            ..a.clone()
        };
        assert!(d.needs_reload(&a));
    }
}
