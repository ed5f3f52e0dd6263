//! Key and value generation matches db_bench byte for byte.

use db_bench_port::keys::{KeyGen, ValueGen, ValueSizeDist};
use db_bench_port::random::{Random, Random64};

#[test]
fn key_is_low_bytes_big_endian_then_ascii_zero_padding() {
    let g = KeyGen::new(16);
    let v = 0x0102_0304_0506_0708u64;
    let mut expect = vec![1u8, 2, 3, 4, 5, 6, 7, 8];
    expect.extend_from_slice(b"00000000");
    assert_eq!(g.key(v, 1_000_000), expect);

    let mut one = vec![0u8; 7];
    one.push(1);
    one.extend_from_slice(b"00000000");
    assert_eq!(g.key(1, 1_000_000), one);
}

#[test]
fn short_keys_keep_the_low_bytes() {
    // key_size 4: bytes_to_fill = min(4, 8) = 4, the low four bytes of v.
    assert_eq!(
        KeyGen::new(4).key(0x0102_0304_0506_0708, 10),
        vec![5, 6, 7, 8]
    );
    assert_eq!(
        KeyGen::new(8).key(0x0102_0304_0506_0708, 10),
        vec![1, 2, 3, 4, 5, 6, 7, 8]
    );
    assert_eq!(KeyGen::new(1).key(0x1ff, 10), vec![0xff]);
}

#[test]
fn sixty_four_byte_keys_as_in_the_seed_run() {
    let k = KeyGen::new(64).key(25_000, 5_000_000);
    assert_eq!(k.len(), 64);
    assert_eq!(&k[..8], &25_000u64.to_be_bytes());
    assert!(k[8..].iter().all(|b| *b == b'0'));
}

#[test]
fn prefixed_keys() {
    // keys_per_prefix 10 over 100 keys: 10 prefixes, prefix = v % 10.
    let g = KeyGen {
        key_size: 16,
        prefix_size: 4,
        keys_per_prefix: 10,
    };
    let k = g.key(23, 100);
    assert_eq!(&k[..4], &[0, 0, 0, 3]);
    assert_eq!(&k[4..12], &23u64.to_be_bytes());
    assert_eq!(&k[12..], b"0000");
}

#[test]
fn keys_sort_like_their_integers() {
    let g = KeyGen::new(16);
    let mut prev = g.key(0, 5000);
    for i in 1..5000 {
        let k = g.key(i, 5000);
        assert!(prev < k, "Key({}) >= Key({i})", i - 1);
        prev = k;
    }
}

#[test]
fn value_generator_matches_random_301_stream() {
    // Lehmer generator seeded 301, values Next() % 127 (RandomBinaryString):
    // the first piece is 50 random bytes repeated to 100.
    let mut g = ValueGen::new(0.5, ValueSizeDist::Fixed(100), 0);
    let first: Vec<u8> = vec![
        116, 16, 28, 60, 76, 72, 55, 3, 85, 7, 7, 29, 108, 114, 39, 6,
    ];
    assert_eq!(&g.data()[..16], &first[..]);
    assert_eq!(&g.data()[50..66], &first[..]);
    assert_eq!(&g.data()[100..108], &[95, 117, 11, 81, 60, 99, 78, 27]);
    let a = g.generate(100).to_vec();
    let b = g.generate(100).to_vec();
    assert_eq!(&a[..16], &first[..]);
    assert_eq!(&b[..8], &[95, 117, 11, 81, 60, 99, 78, 27]);
}

#[test]
fn compression_ratio_one_is_incompressible_pieces() {
    let g = ValueGen::new(1.0, ValueSizeDist::Fixed(100), 0);
    // With ratio 1.0 each 100-byte piece is 100 fresh random bytes.
    assert_ne!(&g.data()[..50], &g.data()[50..100]);
}

#[test]
fn generator_wraps_at_the_end_of_its_buffer() {
    let mut g = ValueGen::new(0.5, ValueSizeDist::Fixed(1000), 0);
    let len = g.data().len();
    let data = g.data().to_vec();
    for _ in 0..(len / 1000) {
        g.generate(1000);
    }
    assert_eq!(g.generate(1000), &data[..1000]);
}

#[test]
fn random_generators_are_the_reference_ones() {
    let mut r = Random::new(301);
    assert_eq!(r.next() % 127, 116);
    // std::mt19937_64 with the default seed: 10000th output.
    let mut m = Random64::new(5489);
    let v = (0..10000).map(|_| m.next()).last();
    assert_eq!(v, Some(9_981_545_732_273_789_042));
}

#[test]
fn std_shuffle_matches_libstdcxx() {
    // Reference values printed by g++ 12 (libstdc++) for
    // std::shuffle(v, std::mt19937(42)) over 0..n.
    use db_bench_port::random::std_shuffle;
    for (n, head, last) in [
        (10u64, [1u64, 6, 7, 0, 5, 9, 8, 2], 4u64),
        (1001, [503, 312, 306, 513, 833, 394, 640, 821], 44),
        (
            70000,
            [67453, 53608, 43891, 25566, 61703, 52017, 68291, 12044],
            9000,
        ),
    ] {
        let mut v: Vec<u64> = (0..n).collect();
        std_shuffle(&mut v, 42);
        assert_eq!(&v[..8], &head, "n={n}");
        assert_eq!(v[n as usize - 1], last, "n={n}");
    }
}

#[test]
fn random64_uniform_matches_libstdcxx() {
    // std::uniform_int_distribution<uint64_t>(0, 999) over mt19937_64(12345),
    // and (0, 12345678901234) over mt19937_64(7), from g++ 12.
    let mut g = Random64::new(12345);
    let got: Vec<u64> = (0..6).map(|_| g.uniform(1000)).collect();
    assert_eq!(got, vec![357, 400, 689, 559, 574, 207]);
    let mut g = Random64::new(7);
    let got: Vec<u64> = (0..3).map(|_| g.uniform(12_345_678_901_235)).collect();
    assert_eq!(
        got,
        vec![9_313_398_732_881, 11_719_767_831_468, 1_449_559_012_071]
    );
}
