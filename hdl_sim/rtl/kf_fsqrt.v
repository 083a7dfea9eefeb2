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
    localparam ST = 4 + XW + 2 * K + RS + K;    // {nan, inf, zero, sign, exp, rad, rem, root}
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
    wire [ST-1:0] s0 = {nan, ia, za, sa, eo, rad, {RS{1'b0}}, {K{1'b0}}};
    wire [(NS+1)*ST-1:0] chain;
    kf_pipe #(.W(ST), .N(1)) u_p0 (.clk(clk), .d(s0), .q(chain[ST-1:0]));

    genvar g;
    generate
        for (g = 0; g < NS; g = g + 1) begin : g_stage
            wire [ST-1:0] cur = chain[g*ST +: ST];
            reg  [2*K-1:0] rd;
            reg  [RS+1:0]  r4;
            reg  [RS+1:0]  trial;
            reg  [RS-1:0]  rem;
            reg  [K-1:0]   root;
            integer i;
            always @* begin
                rd = cur[RS+K +: 2*K];
                rem = cur[K +: RS];
                root = cur[K-1:0];
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
            kf_pipe #(.W(ST), .N(1)) u_ps (
                .clk(clk), .d({cur[ST-1 -: 4+XW], rd, rem, root}), .q(chain[(g+1)*ST +: ST]));
        end
    endgenerate

    wire [ST-1:0] fin = chain[NS*ST +: ST];
    wire [EW+MW:0] r;
    kf_round #(.EW(EW), .MW(MW), .SW(K), .XW(XW)) u_round (
        .nan(fin[ST-1]), .inf(fin[ST-2]), .zero(fin[ST-3]), .sign(fin[ST-4]),
        .exp(fin[ST-5 -: XW]), .sig(fin[K-1:0]), .sticky(fin[K +: RS] != {RS{1'b0}}), .y(r));
    kf_pipe #(.W(EW + MW + 1), .N(1)) u_pr (.clk(clk), .d(r), .q(y));
    kf_vpipe #(.N(LATENCY)) u_v (.clk(clk), .rst(rst), .d(valid_in), .q(valid_out));
    wire unused_rad = |fin[RS+K +: 2*K] | ONE[0];
endmodule
`default_nettype wire
