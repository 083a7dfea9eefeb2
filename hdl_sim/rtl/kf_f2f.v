// kf_f2f: convert binary(1+EWI+MWI) to binary(1+EWO+MWO), round to nearest even.
//   Widening is exact; narrowing rounds, produces subnormals and overflows to +-inf.  NaN
//   gives the canonical quiet NaN of the output format.  Latency LATENCY = 1 clock.
`default_nettype none
module kf_f2f #(
    parameter EWI = 8,
    parameter MWI = 23,
    parameter EWO = 11,
    parameter MWO = 52
) (
    input  wire             clk,
    input  wire             rst,
    input  wire             valid_in,
    input  wire [EWI+MWI:0] a,
    output wire             valid_out,
    output wire [EWO+MWO:0] y
);
    localparam LATENCY = 1;
    localparam XW = ((EWI > EWO) ? EWI : EWO) + 2;
    localparam SW = (MWI + 1 > MWO + 3) ? MWI + 1 : MWO + 3;
    localparam integer REBIAS_I = (1 << (EWO - 1)) - (1 << (EWI - 1));  // BIAS_O - BIAS_I
    localparam [XW-1:0] REBIAS = REBIAS_I[XW-1:0];

    wire           s, nan, inf, zero;
    wire [XW-1:0]  e;
    wire [MWI:0]   m;
    kf_unpack #(.EW(EWI), .MW(MWI), .XW(XW)) u_ua (
        .x(a), .sign(s), .is_nan(nan), .is_inf(inf), .is_zero(zero), .exp(e), .sig(m));
    wire [SW-1:0] sig;
    generate
        if (SW > MWI + 1) begin : g_pad
            assign sig = {m, {(SW-MWI-1){1'b0}}};
        end else begin : g_nopad
            assign sig = m;
        end
    endgenerate
    wire [EWO+MWO:0] r;
    kf_round #(.EW(EWO), .MW(MWO), .SW(SW), .XW(XW)) u_round (
        .nan(nan), .inf(inf), .zero(zero), .sign(s), .exp(e + REBIAS), .sig(sig),
        .sticky(1'b0), .y(r));
    kf_pipe #(.W(EWO + MWO + 1), .N(1)) u_p (.clk(clk), .d(r), .q(y));
    kf_vpipe #(.N(LATENCY)) u_v (.clk(clk), .rst(rst), .d(valid_in), .q(valid_out));
endmodule
`default_nettype wire
