// kf_i2f: IW-bit integer (SIGNED = 1: two's complement, 0: unsigned) to IEEE-754, round to
//   nearest even.  Zero gives +0.  Latency LATENCY = 1 clock.
`default_nettype none
module kf_i2f #(
    parameter IW     = 32,
    parameter SIGNED = 1,
    parameter EW     = 8,
    parameter MW     = 23
) (
    input  wire           clk,
    input  wire           rst,
    input  wire           valid_in,
    input  wire [IW-1:0]  a,
    output wire           valid_out,
    output wire [EW+MW:0] y
);
    localparam LATENCY = 1;
    localparam XW = EW + 2;
    localparam SW = (IW > MW + 3) ? IW : MW + 3;
    localparam integer EXP_I = (1 << (EW - 1)) - 1 + IW - 1;  // value = mag / 2**(IW-1) * 2**(IW-1)
    localparam [XW-1:0] EXP = EXP_I[XW-1:0];

    wire          s = (SIGNED != 0) & a[IW-1];
    wire [IW-1:0] mag = s ? ({IW{1'b0}} - a) : a;
    wire [SW-1:0] sig;
    generate
        if (SW > IW) begin : g_pad
            assign sig = {mag, {(SW-IW){1'b0}}};
        end else begin : g_nopad
            assign sig = mag;
        end
    endgenerate
    wire [EW+MW:0] r;
    kf_round #(.EW(EW), .MW(MW), .SW(SW), .XW(XW)) u_round (
        .nan(1'b0), .inf(1'b0), .zero(1'b0), .sign(s), .exp(EXP), .sig(sig), .sticky(1'b0),
        .y(r));
    kf_pipe #(.W(EW + MW + 1), .N(1)) u_p (.clk(clk), .d(r), .q(y));
    kf_vpipe #(.N(LATENCY)) u_v (.clk(clk), .rst(rst), .d(valid_in), .q(valid_out));
endmodule
`default_nettype wire
