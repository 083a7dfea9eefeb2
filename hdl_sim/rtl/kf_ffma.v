// kf_ffma: IEEE-754 fused multiply-add a * b + c with a single rounding (nearest even).
//   Latency LATENCY = 3 clocks, one input per clock.  Canonical NaN for every NaN result,
//   including inf * 0 + NaN and inf - inf.  An exact zero result is +0 unless a * b and c are
//   both zeros of negative sign.
//   Stage 1: unpack and normalise a, b, c; exact product.  Stage 2: align and add.
//   Stage 3: normalise, round, pack.
`default_nettype none
module kf_ffma #(
    parameter EW = 8,
    parameter MW = 23
) (
    input  wire           clk,
    input  wire           rst,
    input  wire           valid_in,
    input  wire [EW+MW:0] a,
    input  wire [EW+MW:0] b,
    input  wire [EW+MW:0] c,
    output wire           valid_out,
    output wire [EW+MW:0] y
);
    localparam LATENCY = 3;
    localparam XW = EW + 2;
    localparam PW = 2 * MW + 2;
    localparam U1 = 7 + 2 * XW + PW + MW + 1;  // {nan, inf, isign, sp, sc, zp, zc, ep, ec, prod, mc}
    localparam U2 = 4 + XW + PW + 4;           // {nan, inf, zero, sign, exp, sum}
    localparam integer BIAS_M1_I = (1 << (EW - 1)) - 2;
    localparam [XW-1:0] BIAS_M1 = BIAS_M1_I[XW-1:0];

    wire          sa, na, ia, za, sb, nb, ib, zb, sc, nc, ic, zc;
    wire [XW-1:0] ea, eb, ec;
    wire [MW:0]   ma, mb, mc;
    kf_unpack #(.EW(EW), .MW(MW), .XW(XW), .NORM(1)) u_ua (
        .x(a), .sign(sa), .is_nan(na), .is_inf(ia), .is_zero(za), .exp(ea), .sig(ma));
    kf_unpack #(.EW(EW), .MW(MW), .XW(XW), .NORM(1)) u_ub (
        .x(b), .sign(sb), .is_nan(nb), .is_inf(ib), .is_zero(zb), .exp(eb), .sig(mb));
    kf_unpack #(.EW(EW), .MW(MW), .XW(XW), .NORM(1)) u_uc (
        .x(c), .sign(sc), .is_nan(nc), .is_inf(ic), .is_zero(zc), .exp(ec), .sig(mc));

    wire sp = sa ^ sb;
    wire ip = ia | ib;
    wire nan = na | nb | nc | (ia & zb) | (ib & za) | (ip & ic & (sp ^ sc));
    wire [PW-1:0] prod = {{(MW+1){1'b0}}, ma} * {{(MW+1){1'b0}}, mb};
    wire [XW-1:0] ep = ea + eb - BIAS_M1;
    wire [U1-1:0] u1, q1;
    assign u1 = {nan, ip | ic, ip ? sp : sc, sp, sc, za | zb, zc, ep, ec, prod, mc};
    kf_pipe #(.W(U1), .N(1)) u_p1 (.clk(clk), .d(u1), .q(q1));

    wire          q_nan = q1[U1-1];
    wire          q_inf = q1[U1-2];
    wire          q_isign = q1[U1-3];
    wire          q_sp = q1[U1-4];
    wire          q_sc = q1[U1-5];
    wire          q_zp = q1[U1-6];
    wire          q_zc = q1[U1-7];
    wire [XW-1:0] q_ep = q1[PW+MW+1+XW +: XW];
    wire [XW-1:0] q_ec = q1[PW+MW+1 +: XW];
    wire [PW-1:0] q_prod = q1[MW+1 +: PW];
    wire [MW:0]   q_mc = q1[MW:0];
    wire          ss, zs;
    wire [XW-1:0] es;
    wire [PW+3:0] ms;
    kf_align_add #(.SW(PW), .XW(XW)) u_add (
        .sa(q_sp), .za(q_zp), .ea(q_ep), .ma(q_prod),
        .sb(q_sc), .zb(q_zc), .eb(q_ec), .mb({q_mc, {(MW+1){1'b0}}}),
        .sign(ss), .zero(zs), .exp(es), .sig(ms));
    wire [U2-1:0] u2, q2;
    assign u2 = {q_nan, q_inf, zs, q_inf ? q_isign : ss, es, ms};
    kf_pipe #(.W(U2), .N(1)) u_p2 (.clk(clk), .d(u2), .q(q2));

    wire [EW+MW:0] r;
    kf_round #(.EW(EW), .MW(MW), .SW(PW + 4), .XW(XW)) u_round (
        .nan(q2[U2-1]), .inf(q2[U2-2]), .zero(q2[U2-3]), .sign(q2[U2-4]),
        .exp(q2[PW+4 +: XW]), .sig(q2[PW+3:0]), .sticky(1'b0), .y(r));
    kf_pipe #(.W(EW + MW + 1), .N(1)) u_p3 (.clk(clk), .d(r), .q(y));
    kf_vpipe #(.N(LATENCY)) u_v (.clk(clk), .rst(rst), .d(valid_in), .q(valid_out));
endmodule
`default_nettype wire
