// kf_f2i: IEEE-754 value to OW-bit integer (SIGNED = 1: two's complement, 0: unsigned).
//   Truncates toward zero and saturates to the target range; NaN gives 0, +-inf saturate,
//   negative values give 0 for unsigned targets.  Latency LATENCY = 1 clock.
`default_nettype none
module kf_f2i #(
    parameter EW     = 8,
    parameter MW     = 23,
    parameter OW     = 32,
    parameter SIGNED = 1
) (
    input  wire           clk,
    input  wire           rst,
    input  wire           valid_in,
    input  wire [EW+MW:0] a,
    output wire           valid_out,
    output wire [OW-1:0]  y
);
    localparam LATENCY = 1;
    localparam W = EW + MW + 1;
    localparam XW = EW + 2;
    localparam TW = (OW > MW + 1) ? OW : MW + 1;
    localparam integer BIAS_I = (1 << (EW - 1)) - 1;
    localparam [XW-1:0] BIAS = BIAS_I[XW-1:0];
    localparam integer MWX_I = MW;
    localparam [XW-1:0] MWX = MWX_I[XW-1:0];
    localparam integer LIMIT_I = (SIGNED != 0) ? OW - 1 : OW;  // first |u| that saturates
    localparam [XW-1:0] LIMIT = LIMIT_I[XW-1:0];
    localparam [OW-1:0] MAXV = (SIGNED != 0) ? {1'b0, {(OW-1){1'b1}}} : {OW{1'b1}};
    localparam [OW-1:0] MINV = (SIGNED != 0) ? {1'b1, {(OW-1){1'b0}}} : {OW{1'b0}};

    wire          s = a[W-1];
    wire [EW-1:0] field = a[W-2:MW];
    wire          nan = (field == {EW{1'b1}}) & (a[MW-1:0] != {MW{1'b0}});
    wire [XW-1:0] u = {{(XW-EW){1'b0}}, field} - BIAS;
    wire [TW-1:0] sig = {{(TW-MW-1){1'b0}}, 1'b1, a[MW-1:0]};
    wire [XW-1:0] up = u - MWX;
    wire [XW-1:0] dn = MWX - u;
    wire [TW-1:0] mag = up[XW-1] ? (sig >> dn) : (sig << up);
    wire [OW-1:0] m = mag[OW-1:0];

    reg [OW-1:0] r;
    always @* begin
        if (nan | u[XW-1]) r = {OW{1'b0}};
        else if ((SIGNED == 0) & s) r = {OW{1'b0}};
        else if ($signed(u) >= $signed(LIMIT)) r = s ? MINV : MAXV;
        else r = s ? ({OW{1'b0}} - m) : m;
    end
    kf_pipe #(.W(OW), .N(1)) u_p (.clk(clk), .d(r), .q(y));
    kf_vpipe #(.N(LATENCY)) u_v (.clk(clk), .rst(rst), .d(valid_in), .q(valid_out));
    wire unused_mag = |mag;
endmodule
`default_nettype wire
