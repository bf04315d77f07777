//! The cache's paging, rings, restore and truncation on a small description.

use super::*;

/// Three layers, the last global, two KV heads of 4, window 4.
fn arch() -> ModelArch {
    ModelArch::for_tests(&[true, true, false], 2, 4, 4, 0)
}

fn cache(context: usize, chunk: usize) -> KvCache {
    KvCache::new(&arch(), context, chunk, KvStorage::Host).unwrap()
}

/// K/V values that name their head and position, `[n_kv, seq, d]`.
fn kv(start: usize, seq: usize, salt: f32) -> Vec<f32> {
    let mut out = Vec::new();
    for h in 0..2 {
        for p in start..start + seq {
            for j in 0..4 {
                // distinct for nearby positions and exact in f16 (the host stores f16)
                out.push(((h * 7 + p * 3 + j) % 1000) as f32 + salt);
            }
        }
    }
    out
}

/// Write positions `..n` in steps of `step`, as the model does.
fn fill(cache: &mut KvCache, n: usize, step: usize) {
    let mut p = cache.len();
    while p < n {
        let seq = step.min(n - p);
        cache.begin_step(p, seq);
        for l in 0..3 {
            cache
                .write_slices(l, p, &kv(p, seq, 0.0), &kv(p, seq, 0.5))
                .unwrap();
        }
        p += seq;
        cache.advance(p);
    }
}

#[test]
fn global_layers_grow_by_pages_and_keep_their_data() {
    let mut cache = cache(1000, 2);
    let per_slot = 2 * 2 * 4 * 2; // K and V, 2 heads of 4, f16
    let rings = 2 * 6 * per_slot;
    assert_eq!(cache.allocated_bytes(), rings, "no global page before use");
    fill(&mut cache, 3, 2);
    assert_eq!(cache.allocated_bytes(), rings + PAGE_SIZE * per_slot);
    fill(&mut cache, PAGE_SIZE + 1, 7);
    assert_eq!(cache.allocated_bytes(), rings + 2 * PAGE_SIZE * per_slot);
    // the two heads were re-spaced when the second page came: every position reads back
    let (k, v) = cache.read_positions(2, 0..PAGE_SIZE + 1).unwrap();
    assert_eq!(k, kv(0, PAGE_SIZE + 1, 0.0));
    assert_eq!(v, kv(0, PAGE_SIZE + 1, 0.5));
    // the last page stops at the context
    fill(&mut cache, 1000, 64);
    assert_eq!(cache.allocated_bytes(), rings + 1000 * per_slot);
    assert!(cache.check_room(1).is_err());
}

#[test]
fn a_ring_reads_back_its_newest_window_in_position_order() {
    let mut cache = cache(100, 2);
    fill(&mut cache, 11, 2);
    assert_eq!(cache.live_range(0), 7..11);
    assert_eq!(cache.live_range(2), 0..11);
    let (k, _) = cache.read_positions(0, 7..11).unwrap();
    assert_eq!(k, kv(7, 4, 0.0));
}

#[test]
fn restored_positions_read_back_and_truncation_checks_the_ring() {
    let mut a = cache(100, 2);
    fill(&mut a, 11, 3);
    // another chunk size: another ring size
    let mut b = cache(100, 5);
    for l in 0..3 {
        let r = a.live_range(l);
        let (k, v) = a.read_positions(l, r.clone()).unwrap();
        b.write_slices(l, r.start, &k, &v).unwrap();
    }
    b.finish_restore(11, 7);
    for l in 0..3 {
        assert_eq!(b.live_range(l), a.live_range(l));
        assert_eq!(
            b.read_positions(l, a.live_range(l)).unwrap(),
            a.read_positions(l, a.live_range(l)).unwrap()
        );
    }
    // one back keeps positions 7..10, enough for the next query at 10
    assert!(b.truncate(10));
    // back to 5 would need 2..5, which the restored ring never held
    assert!(!b.truncate(5));
}

/// The candle backend's masks: a causal step's rows see the positions up to their own; a
/// picture's rows (not causal) see the whole step too, and the window still hides old keys.
#[test]
fn masks_hide_later_positions_only_in_causal_steps() {
    let mut c = cache(32, 8);
    fill(&mut c, 6, 6);
    c.begin_step(6, 3);
    let visible = |sliding: bool, causal: bool| -> Vec<Vec<bool>> {
        let window = sliding.then_some(4);
        let m = c
            .mask(sliding, window, 6, 3, causal, &Device::Cpu)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        m.iter()
            .map(|row| row.iter().map(|v| *v == 0.0).collect())
            .collect()
    };
    let global = visible(false, true);
    assert_eq!(
        global[0],
        [true, true, true, true, true, true, true, false, false]
    );
    let picture = visible(false, false);
    assert!(picture.iter().all(|row| row.iter().all(|v| *v)));
    // the ring: row 0 (position 6) sees positions 3..=8, not 2 and before
    let ring = &c.ring_pos;
    let seen: Vec<usize> = visible(true, false)[0]
        .iter()
        .enumerate()
        .filter(|(_, v)| **v)
        .filter_map(|(s, _)| ring[s])
        .collect();
    let mut seen = seen;
    seen.sort_unstable();
    assert_eq!(seen, vec![3, 4, 5, 6, 7, 8]);
}
