/* ---- base_bool */
static inline ku8 k_sel_bool(ku8 m, ku8 a, ku8 b) { return (ku8)((a & m) | (b & ~m)); }

/* ---- base_f32 */
static inline ku32 k_bits_f32(kf32 x) { K_AS(ku32, x); }
static inline kf32 k_float_f32(ku32 x) { K_AS(kf32, x); }
static inline kf32 k_sel_f32(ku32 m, kf32 a, kf32 b)
{
    return k_float_f32((k_bits_f32(a) & m) | (k_bits_f32(b) & ~m));
}
static inline kf32 k_canon_f32(kf32 x) /* every NaN -> the positive canonical quiet NaN */
{
    ku32 m = K_C32(x, !=, x);
    return k_float_f32((k_bits_f32(x) & ~m) | (0x7fc00000u & m));
}

/* ---- base_f64 */
static inline ku64 k_bits_f64(kf64 x) { K_AS(ku64, x); }
static inline kf64 k_float_f64(ku64 x) { K_AS(kf64, x); }
static inline kf64 k_sel_f64(ku64 m, kf64 a, kf64 b)
{
    return k_float_f64((k_bits_f64(a) & m) | (k_bits_f64(b) & ~m));
}
static inline kf64 k_canon_f64(kf64 x) /* every NaN -> the positive canonical quiet NaN */
{
    ku64 m = K_C64(x, !=, x);
    return k_float_f64((k_bits_f64(x) & ~m) | (UINT64_C(0x7ff8000000000000) & m));
}

/* ---- base_i32 */
static inline ks32 k_signed_i32(ku32 x) { K_AS(ks32, x); }
static inline ku32 k_unsigned_i32(ks32 x) { K_AS(ku32, x); }
static inline ku32 k_sel_i32(ku32 m, ku32 a, ku32 b) { return (a & m) | (b & ~m); }

/* ---- base_i64 */
static inline ks64 k_signed_i64(ku64 x) { K_AS(ks64, x); }
static inline ku64 k_unsigned_i64(ks64 x) { K_AS(ku64, x); }
static inline ku64 k_sel_i64(ku64 m, ku64 a, ku64 b) { return (a & m) | (b & ~m); }

/* ---- base_u32 */
static inline ku32 k_sel_u32(ku32 m, ku32 a, ku32 b) { return (a & m) | (b & ~m); }

/* ---- base_u64 */
static inline ku64 k_sel_u64(ku64 m, ku64 a, ku64 b) { return (a & m) | (b & ~m); }

/* ---- k_add_f32 */
static inline kf32 k_add_f32(kf32 a, kf32 b)
{
    return a + b;
}

/* ---- k_add_f32_n */
static K_NOINLINE void k_add_f32_n(size_t n, kf32 *r, const kf32 *a, const kf32 *b)
{
    for (size_t j = 0; j < n; j++)
        r[j] = k_add_f32(a[j], b[j]);
}

/* ---- k_add_f64 */
static inline kf64 k_add_f64(kf64 a, kf64 b)
{
    return a + b;
}

/* ---- k_bitcast_f32_u32 */
static inline ku32 k_bitcast_f32_u32(kf32 x)
{
    return k_bits_f32(x);
}

/* ---- k_bitcast_f32_u32_n */
static K_NOINLINE void k_bitcast_f32_u32_n(size_t n, ku32 *r, const kf32 *a)
{
    for (size_t j = 0; j < n; j++)
        r[j] = k_bitcast_f32_u32(a[j]);
}

/* ---- k_canon_f32_n */
static K_NOINLINE void k_canon_f32_n(size_t n, kf32 *r, const kf32 *a)
{
    for (size_t j = 0; j < n; j++)
        r[j] = k_canon_f32(a[j]);
}

/* ---- k_canon_f64_n */
static K_NOINLINE void k_canon_f64_n(size_t n, kf64 *r, const kf64 *a)
{
    for (size_t j = 0; j < n; j++)
        r[j] = k_canon_f64(a[j]);
}

/* ---- k_convert_f32_i32 */
static inline ku32 k_convert_f32_i32(kf32 x)
{
    kf32 lo_ = K_SPLAT(kf32, -0x1p31f), hi_ = K_SPLAT(kf32, 0x1p31f);
    ku32 ok = K_C32(x, >=, lo_) & K_C32(x, <, hi_);  /* false for NaN */
    ku32 hi = K_C32(x, >=, hi_), lo = K_C32(x, <, lo_);
    kf32 xs = k_float_f32(k_bits_f32(x) & ok);  /* out-of-range lanes -> +0 */
    ku32 v = k_unsigned_i32(K_CVT(xs, ks32));
    return (v & ok) | (hi & 0x7fffffffu) | (lo & 0x80000000u);
}

/* ---- k_convert_f32_i32_n */
static K_NOINLINE void k_convert_f32_i32_n(size_t n, ku32 *r, const kf32 *a)
{
    for (size_t j = 0; j < n; j++)
        r[j] = k_convert_f32_i32(a[j]);
}

/* ---- k_convert_f32_u64 */
static inline ku64 k_convert_f32_u64(kf32 x)
{
    kf32 lo_ = K_SPLAT(kf32, 0.0f), hi_ = K_SPLAT(kf32, 0x1p64f);
    ku32 ok = K_C32(x, >=, lo_) & K_C32(x, <, hi_);  /* false for NaN */
    ku32 hi = K_C32(x, >=, hi_);
    kf32 xs = k_float_f32(k_bits_f32(x) & ok);  /* out-of-range lanes -> +0 */
    ku64 v = K_CVT(xs, ku64);
    return (v & (0u - K_CVT(ok & 1u, ku64))) | ((0u - K_CVT(hi & 1u, ku64)) & UINT64_C(0xffffffffffffffff));
}

/* ---- k_convert_f32_u64_n */
static K_NOINLINE void k_convert_f32_u64_n(size_t n, ku64 *r, const kf32 *a)
{
    for (size_t j = 0; j < n; j++)
        r[j] = k_convert_f32_u64(a[j]);
}

/* ---- k_convert_i32_i64 */
static inline ku64 k_convert_i32_i64(ku32 x)
{
    return (ku64)K_CVT(k_signed_i32(x), ks64);
}

/* ---- k_convert_i32_i64_n */
static K_NOINLINE void k_convert_i32_i64_n(size_t n, ku64 *r, const ku32 *a)
{
    for (size_t j = 0; j < n; j++)
        r[j] = k_convert_i32_i64(a[j]);
}

/* ---- k_convert_i64_i64 */
static inline ku64 k_convert_i64_i64(ku64 x)
{
    return x;
}

/* ---- k_div_i64 */
static inline ku64 k_div_i64(ku64 a, ku64 b)
{
    ku64 z = K_C64(b, ==, K_SPLAT(ku64, 0u));
    ku64 ovf = K_C64(a, ==, K_SPLAT(ku64, UINT64_C(0x8000000000000000))) & K_C64(b, ==, K_SPLAT(ku64, UINT64_C(0xffffffffffffffff)));
    ku64 bad = z | ovf, safe = (b & ~bad) | (bad & 1u);   /* x/0 and MIN/-1 divide by 1 */
    ku64 q = k_unsigned_i64(k_signed_i64(a) / k_signed_i64(safe));
    return q & ~z;
}

/* ---- k_div_i64_n */
static K_NOINLINE void k_div_i64_n(size_t n, ku64 *r, const ku64 *a, const ku64 *b)
{
    for (size_t j = 0; j < n; j++)
        r[j] = k_div_i64(a[j], b[j]);
}

/* ---- k_floor_f32 */
static inline kf32 k_floor_f32(kf32 a)
{
    ku32 b = k_bits_f32(a), sg = b & 0x80000000u;
    ku32 neg = 0u - (b >> 31);
    kf32 ax = k_float_f32(b ^ sg);
    ku32 small = K_C32(ax, <, K_SPLAT(kf32, 0x1p23f));  /* |a| < 2^p: may have a fraction; not NaN */
    kf32 r = (ax + 0x1p23f) - 0x1p23f;              /* exact: rounds |a| to an integer, ties to even */
    kf32 t = k_sel_f32(K_C32(r, >, ax), r - 1.0f, r);
    kf32 c = k_sel_f32(K_C32(r, <, ax), r + 1.0f, r);
    kf32 m = k_sel_f32(neg, c, t);
    ku32 out = ((k_bits_f32(m) | sg) & small) | (b & ~small);  /* the result has a's sign */
    return k_float_f32(out);
}

/* ---- k_floor_f32_n */
static K_NOINLINE void k_floor_f32_n(size_t n, kf32 *r, const kf32 *a)
{
    for (size_t j = 0; j < n; j++)
        r[j] = k_floor_f32(a[j]);
}

/* ---- k_lt_f32 */
static inline ku8 k_lt_f32(kf32 a, kf32 b)
{
    return K_CVT(K_C32(a, <, b) & 1u, ku8);
}

/* ---- k_lt_f32_n */
static K_NOINLINE void k_lt_f32_n(size_t n, ku8 *r, const kf32 *a, const kf32 *b)
{
    for (size_t j = 0; j < n; j++)
        r[j] = k_lt_f32(a[j], b[j]);
}

/* ---- k_max_f64 */
static inline kf64 k_max_f64(kf64 a, kf64 b)
{
    ku64 x = k_bits_f64(a), y = k_bits_f64(b);
    ku64 pick = K_C64(a, >, b), eq = K_C64(a, ==, b), nan = K_C64(a, !=, a) | K_C64(b, !=, b);
    ku64 r = (x & pick) | (y & ~pick);
    r = (r & ~eq) | ((x & y) & eq);      /* equal: only +-0 differ; -0 < +0 */
    return k_float_f64((r & ~nan) | (UINT64_C(0x7ff8000000000000) & nan));
}

/* ---- k_mul_f32 */
static inline kf32 k_mul_f32(kf32 a, kf32 b)
{
    return a * b;
}

/* ---- k_mul_f32_n */
static K_NOINLINE void k_mul_f32_n(size_t n, kf32 *r, const kf32 *a, const kf32 *b)
{
    for (size_t j = 0; j < n; j++)
        r[j] = k_mul_f32(a[j], b[j]);
}

/* ---- k_mul_f64 */
static inline kf64 k_mul_f64(kf64 a, kf64 b)
{
    return a * b;
}

/* ---- k_mul_i32 */
static inline ku32 k_mul_i32(ku32 a, ku32 b)
{
    return a * b;
}

/* ---- k_select_f32 */
static inline kf32 k_select_f32(ku8 c, kf32 a, kf32 b)
{
    return k_sel_f32(0u - K_CVT(c, ku32), a, b);
}

/* ---- k_select_f32_n */
static K_NOINLINE void k_select_f32_n(size_t n, kf32 *r, const ku8 *a, const kf32 *b, const kf32 *c)
{
    for (size_t j = 0; j < n; j++)
        r[j] = k_select_f32(a[j], b[j], c[j]);
}

/* ---- k_shr_i64 */
static inline ku64 k_shr_i64(ku64 a, ku64 b)
{
    ku64 g = 0u - (a >> 63);
    return ((a ^ g) >> (b & 63u)) ^ g;
}

/* ---- k_shr_i64_n */
static K_NOINLINE void k_shr_i64_n(size_t n, ku64 *r, const ku64 *a, const ku64 *b)
{
    for (size_t j = 0; j < n; j++)
        r[j] = k_shr_i64(a[j], b[j]);
}
