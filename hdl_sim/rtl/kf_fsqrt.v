// kf_fsqrt: IEEE-754 square root, round to nearest even, subnormal inputs.
//   Restoring digit-by-digit square root of the normalised significand (made even-exponent),
//   BPS root bits per pipeline stage; K = NS * BPS >= MW + 2 root bits plus the remainder (as
//   sticky) round exactly (a square root is never a tie and never subnormal).
//   Latency LATENCY = NS + 2 clocks (binary32: 9, binary64: 16), one input per clock.
//   sqrt(-0) = -0, sqrt(+inf) = +inf, NaN (canonical) for NaN and every x < 0.
`default_nettype none
module kf_fsqrt #(
    parameter EW = 8,
    parameter MW = 23
) (
    input  wire           clk,
    input  wire           rst,
    input  wire           valid_in,
    input  wire [EW+MW:0] a,
    output wire           valid_out,
    output wire [EW+MW:0] y
);
    localparam BPS = 4;
    localparam NS = (MW + 2 + BPS - 1) / BPS;
    localparam K = NS * BPS;
    localparam LATENCY = NS + 2;
    localparam XW = EW + 2;
    localparam RS = K + 2;                      // remainder, always <= 2 * root
    localparam MT = 4 + XW;                     // {nan, inf, zero, sign, exp}
    localparam integer BIAS_I = (1 << (EW - 1)) - 1;
    localparam [XW-1:0] BIAS = BIAS_I[XW-1:0];
    localparam [XW-1:0] ONE = 1;

    wire          sa, na, ia, za;
    wire [XW-1:0] ea;
    wire [MW:0]   ma;
    kf_unpack #(.EW(EW), .MW(MW), .XW(XW), .NORM(1)) u_ua (
        .x(a), .sign(sa), .is_nan(na), .is_inf(ia), .is_zero(za), .exp(ea), .sig(ma));

    // value = ma / 2**MW * 2**u; for odd u use 2 * ma and u - 1; the radicand integer is
    // scaled by 2**(2K - 2) so that the integer root has K bits with one integer bit
    wire [XW-1:0] u = ea - BIAS;
    wire [XW-1:0] u_even = u - {{(XW-1){1'b0}}, u[0]};
    wire [XW-1:0] eo = {u_even[XW-1], u_even[XW-1:1]} + BIAS;
    wire [2*K-1:0] rad = {1'b0, ma, {(2*K-2-MW){1'b0}}} << u[0];
    wire nan = na | (sa & ~za);
    // flags and exponent ride one delay line; radicand, remainder and root are registered per
    // stage (separate nets keep event-driven simulators fast)
    wire [MT-1:0] meta0 = {nan, ia, za, sa, eo};
    wire [MT-1:0] meta;
    kf_pipe #(.W(MT), .N(NS + 1)) u_meta (.clk(clk), .d(meta0), .q(meta));
    reg [2*K-1:0] rad0;
    always @(posedge clk) rad0 <= rad;

    genvar g;
    generate
        for (g = 0; g < NS; g = g + 1) begin : g_stage
            wire [2*K-1:0] rd_in;
            wire [RS-1:0]  rem_in;
            wire [K-1:0]   root_in;
            if (g == 0) begin : g_first
                assign rd_in = rad0;
                assign rem_in = {RS{1'b0}};
                assign root_in = {K{1'b0}};
            end else begin : g_next
                assign rd_in = g_stage[g-1].rd_q;
                assign rem_in = g_stage[g-1].rem_q;
                assign root_in = g_stage[g-1].root_q;
            end
            reg [2*K-1:0] rd;
            reg [RS+1:0]  r4;
            reg [RS+1:0]  trial;
            reg [RS-1:0]  rem;
            reg [K-1:0]   root;
            integer i;
            always @* begin
                rd = rd_in;
                rem = rem_in;
                root = root_in;
                for (i = 0; i < BPS; i = i + 1) begin
                    r4 = {rem, rd[2*K-1 -: 2]};
                    rd = rd << 2;
                    trial = {{(RS-K){1'b0}}, root, 2'b01};
                    if (r4 >= trial) begin
                        r4 = r4 - trial;
                        root = {root[K-2:0], 1'b1};
                    end else begin
                        root = {root[K-2:0], 1'b0};
                    end
                    rem = r4[RS-1:0];
                end
            end
            reg [2*K-1:0] rd_q;
            reg [RS-1:0]  rem_q;
            reg [K-1:0]   root_q;
            always @(posedge clk) begin
                rd_q <= rd;
                rem_q <= rem;
                root_q <= root;
            end
        end
    endgenerate

    wire [RS-1:0] rem_f = g_stage[NS-1].rem_q;
    wire [EW+MW:0] r;
    kf_round #(.EW(EW), .MW(MW), .SW(K), .XW(XW)) u_round (
        .nan(meta[MT-1]), .inf(meta[MT-2]), .zero(meta[MT-3]), .sign(meta[MT-4]),
        .exp(meta[XW-1:0]), .sig(g_stage[NS-1].root_q), .sticky(rem_f != {RS{1'b0}}), .y(r));
    kf_pipe #(.W(EW + MW + 1), .N(1)) u_pr (.clk(clk), .d(r), .q(y));
    kf_vpipe #(.N(LATENCY)) u_v (.clk(clk), .rst(rst), .d(valid_in), .q(valid_out));
    wire unused_rad = |g_stage[NS-1].rd_q | ONE[0];
endmodule
`default_nettype wire
