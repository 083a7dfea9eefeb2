// kf_lzc: leading-zero count of a W-bit vector (combinational).
//   count = number of zero bits above the most significant one; count = W when in == 0.
//   CW must satisfy 2**CW > W.  Binary search: the input is placed at the top of a
//   power-of-two word with a one just below it, then halves of decreasing size are tested
//   for zero and shifted out (log2 steps, each a wide compare and shift).
`default_nettype none
module kf_lzc #(
    parameter W  = 32,
    parameter CW = 6
) (
    input  wire [W-1:0]  in,
    output reg  [CW-1:0] count
);
    localparam P = 1 << $clog2(W + 1);
    localparam [P-1:0] ONE = 1;
    reg [P-1:0] x;
    integer s;
    always @* begin
        x = ({{(P-W){1'b0}}, in} << (P - W)) | (ONE << (P - W - 1));
        count = {CW{1'b0}};
        for (s = P / 2; s >= 1; s = s / 2) begin
            if ((x >> (P - s)) == {P{1'b0}}) begin
                count = count | s[CW-1:0];
                x = x << s;
            end
        end
    end
endmodule
`default_nettype wire
