// kf_fround: round an IEEE-754 value to an integral value in the same format.
//   MODE 0: floor, 1: ceil, 2: trunc, 3: round half to even.  The sign of a zero result is the
//   sign of the input (floor(-0.5) = -1, ceil(-0.5) = -0).  inf and zero pass through; NaN
//   gives the canonical quiet NaN.  Latency LATENCY = 1 clock, one input per clock.
`default_nettype none
module kf_fround #(
    parameter EW   = 8,
    parameter MW   = 23,
    parameter MODE = 0
) (
    input  wire           clk,
    input  wire           rst,
    input  wire           valid_in,
    input  wire [EW+MW:0] a,
    output wire           valid_out,
    output wire [EW+MW:0] y
);
    localparam LATENCY = 1;
    localparam W = EW + MW + 1;
    localparam XW = EW + 2;
    localparam IXW = $clog2(MW + 1);
    localparam integer BIAS_I = (1 << (EW - 1)) - 1;
    localparam [XW-1:0] BIAS = BIAS_I[XW-1:0];
    localparam integer MWX_I = MW;
    localparam [XW-1:0] MWX = MWX_I[XW-1:0];
    localparam [XW-1:0] M1 = {XW{1'b1}};
    localparam [W-1:0] QNAN = {1'b0, {EW{1'b1}}, 1'b1, {(MW-1){1'b0}}};
    localparam [W-2:0] ONE = {BIAS[EW-1:0], {MW{1'b0}}};

    wire          s = a[W-1];
    wire [EW-1:0] field = a[W-2:MW];
    wire [MW-1:0] frac = a[MW-1:0];
    wire          top = field == {EW{1'b1}};
    wire          zero = a[W-2:0] == {(W-1){1'b0}};
    wire [XW-1:0] u = {{(XW-EW){1'b0}}, field} - BIAS;
    wire [XW-1:0] fx = MWX - u;                  // number of fraction bits, when 0 <= u < MW
    wire [MW-1:0] mask = ~({MW{1'b1}} << fx);
    wire [MW-1:0] fpart = frac & mask;
    wire [MW-1:0] half = {{(MW-1){1'b0}}, 1'b1} << (fx - 1);
    wire [MW:0]   sig = {1'b1, frac};
    wire          lsb = sig[fx[IXW-1:0]];
    wire          any = fpart != {MW{1'b0}};
    wire          inc = (MODE == 0) ? (s & any) :
                        (MODE == 1) ? (~s & any) :
                        (MODE == 2) ? 1'b0 :
                        ((fpart > half) | ((fpart == half) & lsb));
    wire [W-2:0]  stepped = {field, frac & ~mask} + ({{(W-2){1'b0}}, inc} << fx);
    // |a| < 1: the result is 0 or 1 in magnitude
    wire          small_one = (MODE == 0) ? s :
                              (MODE == 1) ? ~s :
                              (MODE == 2) ? 1'b0 :
                              ((u == M1) & (frac != {MW{1'b0}}));
    wire [W-1:0]  tiny = {s, small_one ? ONE : {(W-1){1'b0}}};

    reg [W-1:0] r;
    always @* begin
        if (top & (frac != {MW{1'b0}})) r = QNAN;
        else if (top | zero | ($signed(u) >= $signed(MWX))) r = a;
        else if (u[XW-1]) r = tiny;
        else r = {s, stepped};
    end
    kf_pipe #(.W(W), .N(1)) u_p (.clk(clk), .d(r), .q(y));
    kf_vpipe #(.N(LATENCY)) u_v (.clk(clk), .rst(rst), .d(valid_in), .q(valid_out));
endmodule
`default_nettype wire
