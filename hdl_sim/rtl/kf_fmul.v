// kf_fmul: IEEE-754 multiplication, round to nearest even, subnormals in and out.
//   Latency LATENCY = 2 clocks, one input per clock.  Canonical NaN for every NaN result.
//   Stage 1: unpack and multiply the significands exactly.  Stage 2: normalise, round, pack.
`default_nettype none
module kf_fmul #(
    parameter EW = 8,
    parameter MW = 23
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
    localparam PW = 2 * MW + 2;
    localparam UW = 4 + XW + PW;  // {nan, inf, zero, sign, exp, product}
    localparam integer BIAS_M1_I = (1 << (EW - 1)) - 2;
    localparam [XW-1:0] BIAS_M1 = BIAS_M1_I[XW-1:0];

    wire          sa, na, ia, za, sb, nb, ib, zb;
    wire [XW-1:0] ea, eb;
    wire [MW:0]   ma, mb;
    kf_unpack #(.EW(EW), .MW(MW), .XW(XW)) u_ua (
        .x(a), .sign(sa), .is_nan(na), .is_inf(ia), .is_zero(za), .exp(ea), .sig(ma));
    kf_unpack #(.EW(EW), .MW(MW), .XW(XW)) u_ub (
        .x(b), .sign(sb), .is_nan(nb), .is_inf(ib), .is_zero(zb), .exp(eb), .sig(mb));

    // ma * mb / 2**(2MW) = prod / 2**(PW-1) * 2, hence the + 1 in the exponent
    wire [PW-1:0] prod = {{(MW+1){1'b0}}, ma} * {{(MW+1){1'b0}}, mb};
    wire [XW-1:0] ep = ea + eb - BIAS_M1;
    wire nan = na | nb | (ia & zb) | (ib & za);
    wire [UW-1:0] u1, u2;
    assign u1 = {nan, ia | ib, za | zb, sa ^ sb, ep, prod};
    kf_pipe #(.W(UW), .N(1)) u_p1 (.clk(clk), .d(u1), .q(u2));

    wire [EW+MW:0] r;
    kf_round #(.EW(EW), .MW(MW), .SW(PW), .XW(XW)) u_round (
        .nan(u2[UW-1]), .inf(u2[UW-2]), .zero(u2[UW-3]), .sign(u2[UW-4]),
        .exp(u2[PW +: XW]), .sig(u2[PW-1:0]), .sticky(1'b0), .y(r));
    kf_pipe #(.W(EW + MW + 1), .N(1)) u_p2 (.clk(clk), .d(r), .q(y));
    kf_vpipe #(.N(LATENCY)) u_v (.clk(clk), .rst(rst), .d(valid_in), .q(valid_out));
endmodule
`default_nettype wire
