// kf_fadd: IEEE-754 addition (SUB = 0) or subtraction (SUB = 1), round to nearest even.
//   Parameters EW/MW: exponent/fraction widths (8/23 binary32, 11/52 binary64).
//   Latency LATENCY = 2 clocks, one input per clock: y and valid_out belong to the a, b and
//   valid_in presented two rising edges earlier.  Every NaN result is the canonical quiet NaN.
//   Stage 1: unpack, align, add.  Stage 2: normalise, round, pack.
`default_nettype none
module kf_fadd #(
    parameter EW  = 8,
    parameter MW  = 23,
    parameter SUB = 0
) (
    input  wire           clk,
    input  wire           rst,
    input  wire           valid_in,
    input  wire [EW+MW:0] a,
    input  wire [EW+MW:0] b,
    output wire           valid_out,
    output wire [EW+MW:0] y
);
    localparam LATENCY = 2;
    localparam XW = EW + 2;
    localparam SW = MW + 1;
    localparam UW = 4 + XW + SW + 4;  // {nan, inf, zero, sign, exp, sig}

    wire          sa, na, ia, za, sb0, nb, ib, zb;
    wire [XW-1:0] ea, eb, es;
    wire [SW-1:0] ma, mb;
    wire [SW+3:0] ms;
    wire          ss, zs;
    kf_unpack #(.EW(EW), .MW(MW), .XW(XW)) u_ua (
        .x(a), .sign(sa), .is_nan(na), .is_inf(ia), .is_zero(za), .exp(ea), .sig(ma));
    kf_unpack #(.EW(EW), .MW(MW), .XW(XW)) u_ub (
        .x(b), .sign(sb0), .is_nan(nb), .is_inf(ib), .is_zero(zb), .exp(eb), .sig(mb));
    wire sb = sb0 ^ (SUB != 0);
    kf_align_add #(.SW(SW), .XW(XW)) u_add (
        .sa(sa), .za(za), .ea(ea), .ma(ma), .sb(sb), .zb(zb), .eb(eb), .mb(mb),
        .sign(ss), .zero(zs), .exp(es), .sig(ms));

    wire nan = na | nb | (ia & ib & (sa ^ sb));
    wire inf = ia | ib;
    wire sign = inf ? (ia ? sa : sb) : ss;
    wire [UW-1:0] u1, u2;
    assign u1 = {nan, inf, zs, sign, es, ms};
    kf_pipe #(.W(UW), .N(1)) u_p1 (.clk(clk), .d(u1), .q(u2));

    wire [EW+MW:0] r;
    kf_round #(.EW(EW), .MW(MW), .SW(SW + 4), .XW(XW)) u_round (
        .nan(u2[UW-1]), .inf(u2[UW-2]), .zero(u2[UW-3]), .sign(u2[UW-4]),
        .exp(u2[SW+4 +: XW]), .sig(u2[SW+3:0]), .sticky(1'b0), .y(r));
    kf_pipe #(.W(EW + MW + 1), .N(1)) u_p2 (.clk(clk), .d(r), .q(y));
    kf_vpipe #(.N(LATENCY)) u_v (.clk(clk), .rst(rst), .d(valid_in), .q(valid_out));
endmodule
`default_nettype wire
